<?php
echo "other script ran: " . (1 + 2) . "\n";
