<?php
// error_log() goes to the web server as FastCGI STDERR records, before and after some output.
$tag = $_GET['tag'] ?? 'none';
error_log("peregrine-stderr-marker first $tag");
echo "body before\n";
error_log("peregrine-stderr-marker second $tag");
echo "body after\n";
