"""The minimal ACL rules for a durq producer and worker, as documented in
docs/deployment.md (the tests keep the two in step)."""

# commands the scripts call: scripts run with the caller's permissions
SCRIPT_COMMANDS = (
    "+hexists +zscore +zrem +hget +hset +hdel +rpush +lpush +lpop +llen +zadd +zcard +zrange "
    "+zrangebyscore +zrevrange +zincrby +hincrby +hmget +hlen +sismember +sadd +srem +zmscore "
    "+smembers +type +del +pexpire +zpopmin +hgetall +time +get +set +publish +exists +hscan "
    "+hsetnx +persist +rename +scard +zcount +zremrangebyscore +zrevrangebyscore +unlink "
    "+append +hrandfield +smismember +lindex +pexpireat +ltrim"
)
# Redis 7+ and Valkey: FCALL runs the scripts as Functions, FUNCTION LIST checks that the
# library is durq's own before the first call; Redis 6.2 knows neither (leave them out).
# Never FUNCTION LOAD (nor DELETE, FLUSH, RESTORE): whoever may load a library can make
# every durq client run code of theirs (durq.protocol.libraries); the admin loads it.
FUNCTIONS_ONLY = ("+fcall", "+function|list")
PRODUCER = (
    "on >{password} ~durq:* resetchannels &durq:* -@all +fcall +function|list +evalsha "
    "+script|load +sadd +ping +blmove +lindex +hget +hmget +hset +zrange +smismember "
    "+client|setinfo " + SCRIPT_COMMANDS
)
WORKER = (
    "on >{password} ~durq:* resetchannels &durq:* -@all +fcall +function|list +evalsha "
    "+script|load +sadd +srem +smembers +hset +hgetall +pexpire +del +bzpopmin +blmove "
    "+lindex +ping +info +config|get "
    "+subscribe +zadd +hget +hmget +zrange +scard +smismember "
    "+client|setinfo " + SCRIPT_COMMANDS
)
# the admin who loads durq's library at each deploy (`durq functions load`) and deletes
# those of older versions (`durq functions list`, `durq functions prune`); no keys
ADMIN = (
    "on >{password} resetchannels -@all +function|load +function|list +function|delete "
    "+ping +client|setinfo"
)
