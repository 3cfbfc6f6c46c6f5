<?php
// The in-PHP limiter of hack/bench-php.sh, written the way articles show it:
// a sliding-window log in one Lua script (ZREMRANGEBYSCORE, ZCARD, ZADD,
// PEXPIRE), run through phpredis with EVALSHA, and EVAL when Redis does not
// have the script yet, keyed per tenant from the X-Tenant-ID header. Over the
// limit it answers 429 with Retry-After; when Redis fails it answers 503,
// as the enforcer's failureMode Closed does.
//
// nginx passes REDIS_PORT, and REDIS_PERSISTENT=1 on /limited-pconnect.php,
// where the connection is phpredis' persistent one (pconnect) instead of a
// new one per request.

const LIMIT = 100000;  // requests per window: the benchmark never reaches it
const WINDOW_MS = 1000;

const SLIDING_LOG = <<<'LUA'
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - 1, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, 0, tonumber(oldest[2]) + window - now}
LUA;

function rate_limit(Redis $redis, string $tenant): array|false
{
    $now = (int) (microtime(true) * 1000);
    $args = ['ratelimit:' . $tenant, $now, WINDOW_MS, LIMIT, uniqid('', true)];
    $result = $redis->evalSha(sha1(SLIDING_LOG), $args, 1);
    if ($result === false) { // NOSCRIPT: the first call since Redis started
        $redis->clearLastError();
        $result = $redis->eval(SLIDING_LOG, $args, 1);
    }
    return $result;
}

header('Content-Type: text/plain');
$tenant = $_SERVER['HTTP_X_TENANT_ID'] ?? $_SERVER['REMOTE_ADDR'];
try {
    $redis = new Redis();
    $port = (int) ($_SERVER['REDIS_PORT'] ?? 6379);
    if (($_SERVER['REDIS_PERSISTENT'] ?? '') === '1') {
        $redis->pconnect('127.0.0.1', $port, 0.05);
    } else {
        $redis->connect('127.0.0.1', $port, 0.05);
    }
    $redis->setOption(Redis::OPT_READ_TIMEOUT, 0.05);
    $result = rate_limit($redis, $tenant);
} catch (RedisException $e) {
    $result = false;
}
if ($result === false) {
    http_response_code(503);
    echo "rate limiter unavailable\n";
    exit;
}
[$allowed, $remaining, $retryMs] = $result;
header('X-RateLimit-Limit: ' . LIMIT);
header('X-RateLimit-Remaining: ' . $remaining);
if (!$allowed) {
    http_response_code(429);
    header('Retry-After: ' . max(1, (int) ceil($retryMs / 1000)));
    echo "too many requests\n";
    exit;
}
echo "ok\n";
