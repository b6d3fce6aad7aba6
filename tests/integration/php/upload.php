<?php
// Multipart uploads as PHP parsed them: each file's name, size, error code and SHA-256 of the
// bytes PHP stored, plus the ordinary form fields.
header('Content-Type: application/json');
$files = [];
foreach ($_FILES as $field => $f) {
    $files[$field] = [
        'name' => $f['name'],
        'type' => $f['type'],
        'size' => $f['size'],
        'error' => $f['error'],
        'sha256' => $f['error'] === UPLOAD_ERR_OK ? hash_file('sha256', $f['tmp_name']) : null,
    ];
}
echo json_encode([
    'files' => $files,
    'post' => $_POST,
    'content_length' => $_SERVER['CONTENT_LENGTH'] ?? null,
], JSON_UNESCAPED_SLASHES);
