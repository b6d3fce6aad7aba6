<?php
// ?size=N bytes of numbered 64-byte lines ("%08d " + 54 times one letter + "\n"), written in
// 64 KB pieces; ?sleep_after_ms=M then flushes and sleeps before ending the response;
// ?accel=no asks the server not to buffer (X-Accel-Buffering: no).
header('Content-Type: application/octet-stream');
if (isset($_GET['accel'])) {
    header('X-Accel-Buffering: ' . $_GET['accel']);
}
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
    while (ob_get_level() > 0) {
        ob_end_flush();  // php.ini's output_buffering would keep the bytes from flush()
    }
    flush();
    usleep((int)$_GET['sleep_after_ms'] * 1000);
    echo "end\n";
}
