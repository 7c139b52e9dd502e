-- pause.lua holds the key's sends for a while (pauseScript, in
-- scripts.go; KEYS and the conventions every script keeps are there).
-- ARGV: the pause in µs, the emission interval in µs (0: none), the
-- burst, the state's grace in µs, and the channel to publish the pause on
-- (µs left). The pause never shortens a longer one, and the GCRA's TAT
-- moves to the pause's end plus burst−1 intervals, so that the sends after
-- the pause are spaced by the interval from its end: the fleet resumes
-- without a burst. It replies the pause left, in µs.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local d, ei, burst, grace = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local f = function(x) return string.format('%.0f', x) end
local st = redis.call('HMGET', KEYS[1], 'tat', 'pause')
local tat = tonumber(st[1]) or now
local pause = tonumber(st[2]) or 0
if now + d > pause then
  pause = now + d
  redis.call('HSET', KEYS[1], 'pause', f(pause))
end
local keep = pause
if ei > 0 and tat < pause + (burst - 1) * ei then
  tat = pause + (burst - 1) * ei
  redis.call('HSET', KEYS[1], 'tat', f(tat))
end
if tat > keep then keep = tat end
redis.call('PEXPIRE', KEYS[1], math.ceil((keep - now + grace) / 1000))
redis.call('PUBLISH', ARGV[5], f(pause - now))
return pause - now
