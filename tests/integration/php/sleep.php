<?php
// Sleeps ?ms= milliseconds before answering anything.
$ms = (int)($_GET['ms'] ?? 1000);
usleep($ms * 1000);
echo "slept $ms\n";
