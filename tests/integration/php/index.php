<?php
// The site's front controller (quick mode falls back to /index.php for pretty URLs).
header('Content-Type: application/json');
echo json_encode([
    'controller' => 'root',
    'REQUEST_URI' => $_SERVER['REQUEST_URI'] ?? null,
    'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'] ?? null,
    'QUERY_STRING' => $_SERVER['QUERY_STRING'] ?? null,
], JSON_UNESCAPED_SLASHES);
