<?php
// The plain endpoint of hack/bench-php.sh: an application with no limiter
// code, the one the enforcer is put in front of. It answers what the
// limited endpoint answers when it admits a request.
header('Content-Type: text/plain');
echo "ok\n";
