<?php
header('Content-Type: application/json');
echo json_encode([
    'controller' => 'admin',
    'REQUEST_URI' => $_SERVER['REQUEST_URI'] ?? null,
    'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'] ?? null,
], JSON_UNESCAPED_SLASHES);
