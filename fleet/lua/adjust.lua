-- adjust.lua tells a key's cost buckets (see reserve.lua) what the sends
-- booked before gave back, and the most each can hold now (adjustScript,
-- in scripts.go; KEYS and the conventions every script keeps are there).
-- ARGV: how long the state outlives its last use in µs, the number of
-- units, and for each its name, what was given back (below 0: taken), the
-- µs a unit takes to refill, the quota's limit, the most the bucket can
-- hold now (-1: no bound; else at least 0) and how long ago in µs the
-- server read that (-1: not known). A bucket never holds more than its
-- limit: what is given back to a full one is lost, as a server's refund
-- to a full bucket is. A bound read at a known moment holds less what
-- was booked for sends after it (field b.<unit>, see reserve.lua), which
-- the server had not counted: without that, a fleet whose sends are
-- booked ahead (as under load they are) forgot them at each bound, and a
-- bucket that held more than the server's (sends gone before the quota
-- was known, unbooked) was never brought down to it (2 to 15% refused in
-- 1 run of 10 of TestFleetSharesATokenQuota). A bound read longer ago
-- than reserve.lua keeps its bookings is not applied. It replies the
-- number of units adjusted.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local grace = tonumber(ARGV[1])
local f = function(x) return string.format('%.0f', x) end
local bookedFor = 1000000 -- µs: how long reserve.lua keeps a booking's slot (b.<unit>)
local keep = now
local m = tonumber(ARGV[2]) or 0
for i = 1, m do
  local b = 2 + (i - 1) * 6
  local field, give, ei, cap, most = 'c.' .. ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
  local read = tonumber(ARGV[b + 6]) or -1
  local st = redis.call('HMGET', KEYS[1], field, 'e.' .. ARGV[b + 1], 'b.' .. ARGV[b + 1])
  local bounded = most >= 0
  if bounded and read >= 0 then
    if read > bookedFor then
      bounded = false
    else
      for slot, amount in string.gmatch(st[3] or '', '(%d+):([%d.]+)') do
        if tonumber(slot) > now - read then most = most - tonumber(amount) end
      end
    end
  end
  local tat = tonumber(st[1]) or now
  if tat < now then tat = now end
  local was = tonumber(st[2])
  if was and was > 0 and was ~= ei then tat = now + (tat - now) * ei / was end
  tat = tat - give * ei
  if tat < now then tat = now end
  if bounded and most < cap and tat < now + (cap - most) * ei then tat = now + (cap - most) * ei end
  redis.call('HSET', KEYS[1], field, f(tat), 'e.' .. ARGV[b + 1], string.format('%.17g', ei))
  if tat > keep then keep = tat end
end
if m > 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  local want = math.ceil((keep - now + grace) / 1000)
  if ttl < want then redis.call('PEXPIRE', KEYS[1], want) end
end
return m
