<?php
// Response headers set from PHP: a status from ?status=, a repeated header, three cookies.
if (isset($_GET['status'])) {
    http_response_code((int)$_GET['status']);
}
header('Content-Type: text/plain; charset=utf-8');
header('X-Test-One: first');
header('X-Test-Multi: a');
header('X-Test-Multi: b', false);
setcookie('session', 'abc123', ['path' => '/', 'httponly' => true]);
setcookie('theme', 'dark');
setcookie('lang', 'en');
echo "status " . http_response_code() . " from php\n";
