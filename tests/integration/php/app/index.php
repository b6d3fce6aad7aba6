<?php
// A front controller in the style of WordPress or Laravel: it routes by REQUEST_URI.
header('Content-Type: application/json');
echo json_encode([
    'controller' => 'app',
    'REQUEST_URI' => $_SERVER['REQUEST_URI'] ?? null,
    'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'] ?? null,
    'SCRIPT_FILENAME' => $_SERVER['SCRIPT_FILENAME'] ?? null,
    'DOCUMENT_URI' => $_SERVER['DOCUMENT_URI'] ?? null,
    'QUERY_STRING' => $_SERVER['QUERY_STRING'] ?? null,
    'APP_ENV' => $_SERVER['APP_ENV'] ?? null,
    'get' => $_GET,
], JSON_UNESCAPED_SLASHES);
