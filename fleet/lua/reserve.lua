-- reserve.lua books sends (reserveScript, in scripts.go, after
-- recent.lua; KEYS and the conventions every script keeps are there).
-- ARGV: the emission interval in µs (0: no pacing), the burst, the
-- window's n (0: none) and length in µs, the longest wait accepted in µs
-- (-1: any), the member, how long a member counts as live in µs, how long
-- the state outlives its last use in µs, the sends to book (a lease; 1
-- with a window), whether the shared controller paces (1 or 0), the
-- successes to count for it ("gen:n" for each generation their sends were
-- booked under, comma-separated), the earliest the first send may go,
-- from now, in µs (0: at once), the send's priority and the key's channel
-- (see lanes.lua); then the number of units the send costs something in
-- besides a request, and for each its name, the amount, the µs a unit
-- takes to refill and the quota's limit (see appendCosts, in cost.go). It
-- replies {granted (1, 2 for later, or 0), wait µs, pause left µs, live
-- members, the controller's generation, the interval used in µs, the
-- slot on Redis's clock in µs (0 if not booked), the overtakings counted
-- when it was booked (lanes.lua)}.
--
-- The first send's instant is the latest of: now, the GCRA's slot (TAT −
-- (burst−1)·interval), the pause's end, and, with a window, the n-th
-- newest booking plus the window's length (bookings are monotonic, so
-- only that window need be checked); and, for each unit the send costs
-- something in, the instant that unit's bucket holds the amount: each
-- unit is a GCRA of its own (field c.<unit>, its TAT), whose capacity is
-- the quota's limit, so that a cost taken is the TAT moved on by the
-- amount's refill time and one booked when the bucket is short waits for
-- the bookings ahead of it, across the fleet, first come first served. A
-- send is booked in every unit or none. A unit's refill time is kept
-- (field e.<unit>): when the quota's rate changes (a window learnt), what
-- the bucket lacks, in units, stays what it was. A cost's bucket found
-- full (or full within 100 ms of the slot) is taken as full until 100 ms
-- after the slot: the server's bucket stays full, and refills nothing,
-- until the send reaches it, which a bucket refilled from the slot on
-- would count as free (a few ms of refill at each start from full, never
-- corrected, since what the answers say is left cannot tell it from the
-- sends booked ahead: 1.6-1.9% of a fleet's sends refused on Azure
-- OpenAI's fake in the LLM bench). 100 ms of refill is the price, once at
-- each start from full. A lease of k sends books k consecutive slots of
-- the GCRA, one interval apart from the first: each conforms as a send
-- booked alone would, so that a lease spent at its spacing keeps the
-- fleet within the GCRA. A wait over the longest accepted books nothing.
-- A single send with no window may overtake the sends of lower
-- priorities booked ahead of it (lanes.lua).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ei, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local n, per = tonumber(ARGV[3]), tonumber(ARGV[4])
local maxwait, member = tonumber(ARGV[5]), ARGV[6]
local live, grace = tonumber(ARGV[7]), tonumber(ARGV[8])
local cost = tonumber(ARGV[9])
local adaptive = tonumber(ARGV[10])
local notbefore = tonumber(ARGV[12]) or 0
local prio, channel = tonumber(ARGV[13]) or 0, ARGV[14]
local f = function(x) return string.format('%.0f', x) end
local transit = 100000 -- µs: a cost's bucket is taken as full until then after a slot
-- booked returns list, the slots and amounts of a unit's bookings (field
-- b.<unit>: "slot:amount,…", in the order booked), with amount booked at
-- slot, less the oldest while the first is a second old or the list is
-- over bookedMost bytes (about 256 bookings): adjust.lua takes a bound the
-- server read at a moment less what was booked for sends after it. Only
-- the oldest are read: a booking of a key booked 256 times a second took
-- 2.3-3 times as long as one of requests alone when each parsed the whole
-- list (BenchmarkReserveWithCost).
local bookedFor, bookedMost = 1000000, 6144 -- µs (adjust.lua's bookedFor), bytes
local booked = function(list, slot, amount)
  local from = 1
  while from <= #list do
    local colon = string.find(list, ':', from, true)
    local at = colon and tonumber(string.sub(list, from, colon - 1))
    if at and at > now - bookedFor and #list - from < bookedMost then break end
    local comma = string.find(list, ',', from, true)
    from = comma and comma + 1 or #list + 1
  end
  local entry = f(slot) .. ':' .. string.format('%.3f', amount)
  if from > #list then return entry end
  return string.sub(list, from) .. ',' .. entry
end
local costs = {}
for i = 1, (tonumber(ARGV[15]) or 0) do
  local b = 15 + (i - 1) * 4
  local c = {field = 'c.' .. ARGV[b + 1], amount = tonumber(ARGV[b + 2]), ei = tonumber(ARGV[b + 3]), cap = tonumber(ARGV[b + 4])}
  local st = redis.call('HMGET', KEYS[1], c.field, 'e.' .. ARGV[b + 1], 'b.' .. ARGV[b + 1])
  c.tat, c.booked = tonumber(st[1]) or now, st[3] or ''
  if c.tat < now then c.tat = now end
  -- The quota's rate changed (a window learnt): what the bucket lacks, in
  -- units, stays what it was.
  local was = tonumber(st[2])
  if was and was > 0 and was ~= c.ei then c.tat = now + (c.tat - now) * c.ei / was end
  costs[i] = c
end

redis.call('ZADD', KEYS[3], f(now), member)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', f(now - live))
redis.call('PEXPIRE', KEYS[3], math.ceil(live / 1000))
local members = redis.call('ZCARD', KEYS[3])

local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'W', 'ev', 'gen', 'fd', 'lei', 'sp', 'cv', 'fl', 'fr', 'ssb', 'ssbt', 'dr', 'ep', 'fs', 'fa', 'fz', 'fc', 'lk', 'wf', 'ln', 'ov', 'ot')
local paced = false -- the shared controller's rate sets the interval
local slow = false -- the shared controller paces, no throttle known yet
local tat = tonumber(st[1]) or now
local pause = tonumber(st[2]) or 0
local gen = tonumber(st[5]) or 0
if tat < now then tat = now end
if ei > 0 and st[12] then
  -- A booking at a rate the caller names (a quota the server stated,
  -- after its first answers): the sends the shared controller booked
  -- before it knew of a throttle, in the last second, are in the schedule
  -- at that rate (a second's at most), so that a window the server
  -- counted them in is not spent again.
  if now - (tonumber(st[13]) or 0) <= 1000000 then tat = tat + math.min(tonumber(st[12]) * ei, 1000000) end
  redis.call('HDEL', KEYS[1], 'ssb', 'ssbt')
end
if adaptive == 1 then
  -- The shared controller: count the successes reported, and pace at its
  -- rate once a throttle has measured the limit.
  local spent = tonumber(st[8]) or 0
  -- Every success is the server's rate (the bins); those of sends booked
  -- since the last event (at a generation from ep on) measure the limit,
  -- and the first of them shows the server accepting again: the
  -- generation turns even (see congestScript) and the halvings end.
  -- Those of sends in flight at the event belong to it.
  local ep = tonumber(st[15])
  local all, since = 0, 0
  for g, k in string.gmatch(ARGV[11], '(%d+):(%d+)') do
    g, k = tonumber(g), tonumber(k)
    all = all + k
    if not ep or (g >= ep and g <= gen) then since = since + k end
  end
  if all > 0 then tellBins(now, all) end
  if since > 0 then
    redis.call('HINCRBY', KEYS[1], 'acc', since)
    if gen % 2 == 1 then
      gen = gen + 1
      redis.call('HSET', KEYS[1], 'gen', gen)
    end
    if spent > 0 then
      -- The halvings end; the rate's curve, which they started again,
      -- starts again from here.
      local cv = now
      if st[18] then
        -- Halvings while finding stopped the curve at fz: it goes on
        -- from where it stood.
        cv = math.min((tonumber(st[9]) or tonumber(st[4])) + now - tonumber(st[18]), now)
        redis.call('HDEL', KEYS[1], 'fz')
        st[18] = nil
      end
      local fc = math.max(tonumber(st[19]) or 0, tonumber(st[17]) or 0)
      if st[10] == '1' and spent >= 2 and fc > 0 and tonumber(st[3]) and tonumber(st[3]) > fc then
        -- The server refused the sends booked at the floor's rate, and
        -- at half of it, until now: a limiter that counts refusals
        -- (HAProxy's http_req_rate) locks out a client above its limit
        -- until it slows. (One refusal is the jitter of a rate at the
        -- limit: a token bucket's.) The limit is what it let through
        -- over a whole second (fc, see congestScript; fa, as the
        -- successes in flight at the event are told): the rate holds
        -- at it, as at a limit a climb found, rather than climb from it
        -- into the same lockout.
        -- Such a limiter punishes a crossing with a lockout (all in flight
        -- refused, and the sends that go on): the fleet keeps further
        -- below it from now on (lk, below), and holds there the usual 4
        -- seconds, not the second after a limit a climb measured (fr):
        -- what a lockout let through over a whole second is the limit,
        -- and a probe a second after it crossed into another (4 refused).
        st[3], st[6], st[10], st[11], st[20], cv = string.format('%.17g', fc), '0', '0', '0', '1', now
        st[18] = nil
        redis.call('HSET', KEYS[1], 'W', st[3], 'fd', 0, 'fl', 0, 'fr', 0, 'lk', 1)
        redis.call('HDEL', KEYS[1], 'fz')
      end
      redis.call('HSET', KEYS[1], 'sp', 0, 'cv', f(cv))
      st[9], spent = f(cv), 0
    end
  end
  if not st[4] then redis.call('HSET', KEYS[1], 'ev', f(now)) end
  local W = tonumber(st[3])
  if W and st[10] == '1' and all > since and st[17] then
    -- A floor: the successes of the sends in flight at the first
    -- throttle, told after it, are part of what was accepted (over its
    -- span, a second at least), as long as it stands.
    local fa = tonumber(st[17]) + (all - since) / (tonumber(st[16]) or 1)
    redis.call('HSET', KEYS[1], 'fa', string.format('%.17g', fa))
    if fa > W then
      W = fa
      redis.call('HSET', KEYS[1], 'W', string.format('%.17g', W))
    end
  end
  local rate, cburst = nil, 1
  if not W then
    -- No throttle yet: a slow start, a few sends at once, then a rate
    -- that doubles every 50 ms from 40 a second, so that the fleet's
    -- first sends cross the server's limit by little, not by every
    -- caller's first request at once. A rate past 100,000 a second
    -- paces nothing.
    local s0 = tonumber(st[4]) or now
    local r = 40 * 2 ^ (math.min(now - s0, 2000000) / 50000)
    slow = true
    if r < 100000 then rate, cburst = r, 4 elseif st[7] then redis.call('HDEL', KEYS[1], 'lei') end
  end
  if W then
    -- The rate holds just below the limit, or 3% below one that locked
    -- the fleet out (a fleet's sends are not evenly spaced: 28 in a
    -- quarter second at 0.99 of HAProxy's limit crossed it, 4 refused,
    -- and the limit measured then was 84-88% of it).
    local below = 0.99
    if st[20] == '1' then below = lockedBelow end
    rate = below * W
    local hold = holdFor(now, st[6], st[11], st[14], st[20], st[9] or st[4], st[21])
    local t = ((tonumber(st[18]) or now) - (tonumber(st[9]) or tonumber(st[4])) - hold) / 1000000
    if t > 0 then
      if hold == 0 then
        rate = rate * 2 ^ (2 * t) -- finding: doubling every half second
      else
        -- The probe doubles every second up to 1.1·W, stays there for a
        -- second (what a server's burst hides of a crossing shows then),
        -- and doubles every second from there.
        local top = math.log(1.1 / below) / math.log(2)
        if t <= top then
          rate = rate * 2 ^ t
        elseif t <= top + 1 then
          rate = 1.1 * W
        else
          rate = 1.1 * W * 2 ^ (t - top - 1)
        end
      end
    end
    rate = rate / 2 ^ spent
    if spent > 0 and st[10] == '1' and st[19] then
      -- Halving from a floor: no lower than an eighth of what the server
      -- let through over a whole second, so that the fleet hears soon
      -- when it lets sends through again (a lockout's end, at a rate
      -- halved 8 times, was heard up to 0.75 s late).
      rate = math.max(rate, tonumber(st[19]) / 8)
      -- From the second halving on (a lockout, see congestScript), no
      -- faster than just below what the server let through: the sends
      -- that wait for the lockout's second to pass went at a quarter of
      -- the floor's rate, 124 a second, into the rest of HAProxy's
      -- lockout (15-19 refused in a third of the runs).
      if spent >= 2 then rate = math.min(rate, lockedBelow * tonumber(st[19])) end
    end
  end
  if rate then
    if rate < 0.5 then rate = 0.5 end
    if rate > 1000000 then rate = 1000000 end
    local cei = math.floor(1000000 / rate + 0.5)
    if cei < 1 then cei = 1 end
    if ei == 0 or cei > ei then
      ei, burst, paced = cei, cburst, true
      -- The rate rose since the last booking: the sends booked ahead
      -- were spaced at the old rate, and the queue they make is worth
      -- less time at the new one. (A cut keeps the queue as it is.) The
      -- queue is kept so at once, with the interval it is now worth: a
      -- booking that is told to ask again later books nothing, and the
      -- next must start from both.
      local lei = tonumber(st[7])
      if lei and ei < lei and tat > now then
        tat = now + (tat - now) * ei / lei
        redis.call('HSET', KEYS[1], 'tat', f(tat))
      end
      redis.call('HSET', KEYS[1], 'lei', ei)
    end
  end
end
local least = now -- the earliest the send may go, but for the GCRA and the window
if pause > least then least = pause end
if notbefore > 0 and now + notbefore > least then least = now + notbefore end
for _, c in ipairs(costs) do
  local at = c.tat + (c.amount - c.cap) * c.ei
  if at > least then least = at end
end
local slot = least
if ei > 0 and tat - (burst - 1) * ei > slot then slot = tat - (burst - 1) * ei end
if n > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', f(now - per))
  local c = redis.call('ZCARD', KEYS[2])
  if c > 0 then
    local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    if tonumber(newest[2]) > slot then slot = tonumber(newest[2]) end
  end
  if c >= n then
    local r = redis.call('ZRANGE', KEYS[2], c - n, c - n, 'WITHSCORES')
    if tonumber(r[2]) + per > slot then slot = tonumber(r[2]) + per end
  end
end
local paused = pause - now
if paused < 0 then paused = 0 end
local lanes, ov, recent = readLanes(st[22], now), tonumber(st[23]) or 0, readSlots(st[24])
local over = nil -- the slot at which the send overtakes sends of lower priorities
if ei > 0 and n == 0 and cost == 1 then
  over = overtakeAt(lanes, prio, now, ei, tat, slot, least, recent)
  if over then slot = over end
end
if paced and not over then
  -- A send the shared controller would book far ahead is not booked: it
  -- asks again in a while. The controller's rate may rise meanwhile
  -- (it doubles every half second while finding the limit), and a
  -- send booked at a slot of the old rate would sleep until it.
  local horizon = 250000
  if st[6] ~= '1' and st[3] then horizon = math.max(1000000, 4 * ei) end
  local gslot = tat - (burst - 1) * ei
  if gslot > pause and gslot - now > horizon and (maxwait < 0 or maxwait > horizon) then
    redis.call('PEXPIRE', KEYS[1], math.ceil(grace / 1000))
    return {2, horizon, paused, members, gen, ei, 0, ov}
  end
end
if maxwait >= 0 and slot - now > maxwait then
  if adaptive == 1 then redis.call('PEXPIRE', KEYS[1], math.ceil(grace / 1000)) end
  return {0, slot - now, paused, members, gen, ei, 0, ov}
end

local keep = now
if ei > 0 then
  if slot > tat then tat = slot end
  tat = tat + cost * ei
  redis.call('HSET', KEYS[1], 'tat', f(tat))
  keep = tat
  if over then
    ov = overtake(KEYS[1], channel, lanes, prio, over, ei, ov, recent)
  end
  local lane = prio
  if n > 0 or cost > 1 then lane = immovable end
  local last = slot + (cost - 1) * ei
  if not lanes[lane] or lanes[lane] < last then lanes[lane] = last end
  writeLanes(KEYS[1], lanes)
end
if adaptive == 1 then
  -- Booked by the shared controller: counted until the next event, which
  -- measures the rate at which they went (see congestScript).
  redis.call('HINCRBY', KEYS[1], 'bk', cost)
end
if slow then
  -- Booked by the shared controller before any throttle: counted for
  -- the first booking at a named rate (above), for a second.
  if now - (tonumber(st[13]) or 0) > 1000000 then
    redis.call('HSET', KEYS[1], 'ssb', cost, 'ssbt', f(now))
  else
    redis.call('HINCRBY', KEYS[1], 'ssb', cost)
  end
end
if pause > keep then keep = pause end
for _, c in ipairs(costs) do
  if slot + transit > c.tat then c.tat = slot + transit end
  c.tat = c.tat + c.amount * c.ei
  local unit = string.sub(c.field, 3)
  redis.call('HSET', KEYS[1], c.field, f(c.tat), 'e.' .. unit, string.format('%.17g', c.ei), 'b.' .. unit, booked(c.booked, slot, c.amount))
  if c.tat > keep then keep = c.tat end
end
if n > 0 then
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  redis.call('ZADD', KEYS[2], f(slot), member .. ':' .. seq)
  redis.call('PEXPIRE', KEYS[2], math.ceil((slot - now + per) / 1000) + 1000)
  if slot > keep then keep = slot end
end
if ei > 0 or n > 0 or pause > 0 or adaptive == 1 or #costs > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil((keep - now + grace) / 1000))
end
return {1, slot - now, paused, members, gen, ei, slot, ov}
