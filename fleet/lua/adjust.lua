-- adjust.lua tells a key's cost buckets (see reserve.lua) what the sends
-- booked before gave back, and the most each can hold now (adjustScript,
-- in scripts.go; KEYS and the conventions every script keeps are there).
-- ARGV: how long the state outlives its last use in µs, the number of
-- units, and for each its name, what was given back (below 0: taken), the
-- µs a unit takes to refill, the quota's limit, and the most the bucket
-- can hold now (-1: no bound; else at least 0). A bucket never holds more
-- than its limit: what is given back to a full one is lost, as a server's
-- refund to a full bucket is. It replies the number of units adjusted.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local grace = tonumber(ARGV[1])
local f = function(x) return string.format('%.0f', x) end
local keep = now
local m = tonumber(ARGV[2]) or 0
for i = 1, m do
  local b = 2 + (i - 1) * 5
  local field, give, ei, cap, most = 'c.' .. ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
  local st = redis.call('HMGET', KEYS[1], field, 'e.' .. ARGV[b + 1])
  local tat = tonumber(st[1]) or now
  if tat < now then tat = now end
  local was = tonumber(st[2])
  if was and was > 0 and was ~= ei then tat = now + (tat - now) * ei / was end
  tat = tat - give * ei
  if tat < now then tat = now end
  if most >= 0 and most < cap and tat < now + (cap - most) * ei then tat = now + (cap - most) * ei end
  redis.call('HSET', KEYS[1], field, f(tat), 'e.' .. ARGV[b + 1], string.format('%.17g', ei))
  if tat > keep then keep = tat end
end
if m > 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  local want = math.ceil((keep - now + grace) / 1000)
  if ttl < want then redis.call('PEXPIRE', KEYS[1], want) end
end
return m
