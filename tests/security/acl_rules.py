"""The minimal ACL rules for a durq producer and worker, as documented in
docs/deployment.md (the tests keep the two in step)."""

# commands the scripts call: scripts run with the caller's permissions
SCRIPT_COMMANDS = (
    "+hexists +zscore +zrem +hget +hset +hdel +rpush +lpush +lpop +llen +zadd +zcard +zrange "
    "+zrangebyscore +zrevrange +zincrby +hincrby +hmget +hlen +sismember +sadd +srem +zmscore "
    "+smembers +type +del +pexpire +zpopmin +hgetall +time +get +set +publish +exists +hscan "
    "+hsetnx +persist +rename +scard +zcount +zremrangebyscore +zrevrangebyscore +unlink "
    "+append"
)
# Redis 7+ and Valkey: the scripts as Functions; Redis 6.2 knows neither (leave them out)
FUNCTIONS_ONLY = ("+fcall", "+function|load")
PRODUCER = (
    "on >{password} ~durq:* resetchannels &durq:* -@all +fcall +function|load +evalsha "
    "+script|load +sadd +ping +blmove +lindex +hget +hmget +hset +zrange +smismember "
    "+client|setinfo " + SCRIPT_COMMANDS
)
WORKER = (
    "on >{password} ~durq:* resetchannels &durq:* -@all +fcall +function|load +evalsha "
    "+script|load +sadd +srem +smembers +hset +hgetall +pexpire +del +bzpopmin +blmove "
    "+lindex +ping +info +config|get "
    "+subscribe +zadd +hget +hmget +zrange +scard +smismember "
    "+client|setinfo " + SCRIPT_COMMANDS
)
