<?php
// Everything PHP was told about the request, as JSON: the CGI parameters ($_SERVER), the parsed
// query and form, and the raw body's length and SHA-256.
header('Content-Type: application/json');
$body = file_get_contents('php://input');
echo json_encode([
    'server' => $_SERVER,
    'get' => $_GET,
    'post' => $_POST,
    'cookie' => $_COOKIE,
    'body_length' => strlen($body),
    'body_sha256' => hash('sha256', $body),
], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
