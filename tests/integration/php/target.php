<?php
echo "target " . ($_GET['from'] ?? '') . "\n";
