<?php
// The slow endpoint of hack/bench-php-flood.sh: an export that holds its
// PHP-FPM child for a while (50 ms unless ?ms= says otherwise, up to 10 s)
// without using the CPU, as a request waiting on a database or an API does.
$ms = isset($_GET['ms']) ? max(0, min(10000, (int) $_GET['ms'])) : 50;
usleep($ms * 1000);
header('Content-Type: text/plain');
echo "exported\n";
