<?php
// ?size=N bytes of numbered 64-byte lines ("%08d " + 54 times one letter + "\n"), written in
// 64 KB pieces; ?sleep_after_ms=M then flushes and sleeps before ending the response.
header('Content-Type: application/octet-stream');
$size = (int)($_GET['size'] ?? 1048576);
$piece = '';
$sent = 0;
for ($i = 0; $sent < $size; $i++) {
    $line = sprintf("%08d ", $i) . str_repeat(chr(97 + $i % 26), 54) . "\n";
    if ($sent + strlen($line) > $size) {
        $line = substr($line, 0, $size - $sent);
    }
    $piece .= $line;
    $sent += strlen($line);
    if (strlen($piece) >= 65536) {
        echo $piece;
        $piece = '';
    }
}
echo $piece;
if (isset($_GET['sleep_after_ms'])) {
    flush();
    usleep((int)$_GET['sleep_after_ms'] * 1000);
    echo "end\n";
}
