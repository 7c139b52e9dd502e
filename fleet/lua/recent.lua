-- recent.lua is the Lua that reserve.lua and congest.lua begin with
-- (recentLua, in scripts.go; KEYS and the conventions every script keeps
-- are there too): lockedBelow, holdFor, the shared controller's successes
-- in bins of 100 ms of Redis's clock (fields r0..r9, by the bin's index
-- modulo 10; rb the newest bin told of), and recent, the rate at which the
-- last k bins (the current one partial) saw them.

-- The share of a limit found from a lockout the shared controller keeps
-- to: holding there, on its way back after the lockout (reserveScript),
-- and after a probe crossed it (congestScript).
local lockedBelow = 0.97
local function tellBins(now, n)
  local rbin = math.floor(now / 100000)
  local last = tonumber(redis.call('HGET', KEYS[1], 'rb'))
  if not last then
    for b = 0, 9 do redis.call('HSET', KEYS[1], 'r' .. b, 0) end
  elseif rbin > last then
    for b = last + 1, math.min(rbin, last + 10) do redis.call('HSET', KEYS[1], 'r' .. (b % 10), 0) end
  end
  if not last or rbin > last then redis.call('HSET', KEYS[1], 'rb', rbin) end
  redis.call('HINCRBY', KEYS[1], 'r' .. (rbin % 10), n)
end
-- holdFor returns how long, in µs, the rate holds at 0.99·W after an
-- event before it probes: none while the limit is found (fd), a second
-- after a limit the climb just measured (fr), and after a limit that stood
-- dropped to less than half at dr (µs; nil if none), 10% of the time since
-- the drop, three quarters of a second at least, until that is the usual
-- four seconds: a limit that dropped may come back. Otherwise, as long as
-- the limit had stood when the curve began (cv, or ev; since wf, when an
-- event found it more than 5% from the one before: a probe that finds it
-- where it was confirms it), four seconds at least and 30 at most, as
-- Gentle's: a limit the probes keep confirming is probed ever less often.
-- A limiter that locked the fleet out (lk) holds for 8 seconds at least:
-- each probe that crosses it costs the sends in flight and the halvings
-- after (3 or 4 refused).
local function holdFor(now, fd, fr, dr, lk, cv, wf)
  if fd == '1' then return 0 end
  if fr == '1' then return 1000000 end
  dr = tonumber(dr)
  if dr and now - dr < 4000000 / 0.10 then return math.max(750000, 0.10 * (now - dr)) end
  local least = 4000000
  if lk == '1' then least = 8000000 end
  local stood = 0
  cv, wf = tonumber(cv), tonumber(wf)
  if cv and wf then stood = cv - wf end
  return math.min(math.max(least, stood), 30000000)
end
local function recent(now, k)
  local rb = tonumber(redis.call('HGET', KEYS[1], 'rb'))
  if not rb then return 0 end
  local nb = math.floor(now / 100000)
  local sum = 0
  for b = nb - k + 1, nb do
    if b <= rb and b > rb - 10 then sum = sum + (tonumber(redis.call('HGET', KEYS[1], 'r' .. (b % 10))) or 0) end
  end
  return sum / ((now - (nb - k + 1) * 100000) / 1000000)
end
-- halfBooked is half the rate the sends were last booked at (lei, their
-- interval in µs; 0 if none), no more than twice the last half second's
-- successes: a climb crosses the limit within its last doubling.
local function halfBooked(now, lei)
  lei = tonumber(lei)
  if not lei then return 0 end
  return math.min(500000 / lei, 2 * recent(now, 5))
end
-- lastSecond is the rate of the successes of the last second, over a
-- second at least: a burst that came at once in it is no rate above what
-- the second let through.
local function lastSecond(now)
  return recent(now, 10) * math.min((now - (math.floor(now / 100000) - 9) * 100000) / 1000000, 1)
end
