<?php
// Location from PHP: 302 by default (PHP's own rule), or the status given as ?status=.
if (isset($_GET['status'])) {
    header('Location: /target.php?from=redirect', true, (int)$_GET['status']);
} else {
    header('Location: /target.php?from=redirect');
}
echo "redirecting\n";
