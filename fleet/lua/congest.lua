-- congest.lua records a throttle of the shared controller: of a send
-- booked under generation ARGV[1] (congestScript, in scripts.go, after
-- recent.lua; KEYS and the conventions every script keeps are there).
-- ARGV[2] is the state's grace in µs, ARGV[3] the key's channel (an
-- event that lets the queue go is published on it). It replies {1 if it
-- was a new congestion event, the generation now}.
--
-- The generation works as the phase of polite's Gentle: an event makes it
-- odd (ep, the generation right after it), the first success of a send
-- booked since makes it even, and a halving moves it on by 2, odd still. So
-- a throttle tells where its send went: before the last event (in flight at
-- it: the same overload, which three processes throttled at once count
-- once), after it but before anything passed again, or after both. Only the
-- last is a congestion event; the second shows the server still refusing at
-- the new rate (a spent window, a limiter that counts refusals), which is
-- no measure: the rate halves, once per generation (the sends booked before
-- a halving do not halve again), until a success, and the hold starts
-- again. Halvings from a first floor that last (two or more) show a limiter
-- that counts refusals and locks out a client above its limit (HAProxy's):
-- the floor's rate was above the limit, and what the server let through
-- over the first whole second is taken for it (see reserve.lua).
--
-- As Gentle does, an event measures the limit W as the rate the server
-- accepted the sends booked since the last event at (the rate they went
-- at, times the share of their answers told so far that were successes:
-- their successes are told late, see measured below); the first event
-- gives a floor (the successes over at least a second), from which the
-- rate probes at once; an event while the rate probes (or while the limit
-- is being found) can only raise W; one while it holds lowers W, at most
-- 4 times. The rate (in reserve.lua) holds at 0.99·W from the last event
-- or halving for as long as W had stood then, 4 seconds at least and 30
-- at most (after a limit that stood dropped to less than half, for 10% of
-- the time since the drop; as Gentle's: see holdFor), then doubles every
-- second, or every half second while finding (Gentle's doubles every
-- quarter second, at most: a fleet's successes are told late, with each
-- process's next booking, and its throttles a round trip late, by which
-- time a climb twice as fast had gone on past the limit: 11-13% of a
-- fleet of 4's requests refused on burst-1 against 5-9%). Unlike
-- Gentle's, a probe stays at 1.1·W for a second before it doubles on, and
-- never speeds up past it: a fleet holds many sends booked ahead, which
-- go at the rate they were booked at, and a probe that sped up while a
-- server's burst hid the crossing had them refused (9 a probe at 4
-- processes, 24 at 16, against 2 and 3).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = function(x) return string.format('%.17g', x) end
local st = redis.call('HMGET', KEYS[1], 'W', 'ev', 'acc', 'gen', 'fd', 'fl', 'sp', 'lei', 'fr', 'dr', 'ep', 'cv', 'fz',
  'tat', 'pause', 'bk', 'qe', 'lg', 'lk', 'f0', 'wf')
local gen = tonumber(st[4]) or 0
local sent = tonumber(ARGV[1])
local ep = tonumber(st[11])
if sent > gen or (ep and sent < ep) then
  -- In flight at the last event: the same overload. (Or booked under a
  -- state since forgotten.)
  return {0, gen}
end
-- The refusals of the sends booked since the last event, told so far.
local rf = redis.call('HINCRBY', KEYS[1], 'rf', 1)
if sent % 2 == 1 then
  -- Booked since the last event, before anything passed again: the
  -- server still refuses at the new rate. The rate halves, once per
  -- generation.
  if sent ~= gen then return {0, gen} end
  local sp = (tonumber(st[7]) or 0) + 1
  if sp > 16 then sp = 16 end
  if st[5] == '1' then
    -- While the limit is found, the curve stands still until a success
    -- (as Gentle's does), rather than starting again from the estimate.
    if not st[13] then redis.call('HSET', KEYS[1], 'fz', string.format('%.0f', now)) end
    redis.call('HSET', KEYS[1], 'sp', sp, 'gen', gen + 2)
  else
    redis.call('HSET', KEYS[1], 'sp', sp, 'gen', gen + 2, 'cv', string.format('%.0f', now))
  end
  -- The sends booked at the rate before the halving and not yet gone book
  -- again at the halved one, as at an event (if the event let its queue
  -- go): a queue kept went on at the old rate, and a limiter that counts
  -- refusals (HAProxy's) refused all of it, and was held in its lockout
  -- by it (27 refused in the quarter second after a fleet of 4's first
  -- throttle, the rate halved 3 times within 10 ms of it). The new queue
  -- starts an interval of the halved rate from now, not now: the send
  -- refused went about now, and one let go at once was refused in turn,
  -- halved again and let the next go (2,000 refused a second).
  --
  -- A second halving from a first floor shows a limiter that counts the
  -- sends of a window, refused or not (see reserveScript): it refuses
  -- until the first of the fleet's sends leave its second, and each send
  -- before that is refused and counted. The fleet's sends wait for that
  -- (50 ms more: HAProxy's count is an estimate over two periods) rather
  -- than go on at ever lower rates into it (4 or 5 more refused).
  local tat, lei, f0 = tonumber(st[14]) or now, tonumber(st[8]), tonumber(st[20])
  local from = math.max(now, tonumber(st[15]) or 0)
  if ARGV[3] and st[18] == '1' and lei and lei > 0 then
    local nx, wait = from + 2 * lei, false
    if st[6] == '1' and sp >= 2 and f0 and f0 + 1050000 > nx then
      nx, wait = f0 + 1050000, true
    end
    if wait or tat > nx then
      local bk = tonumber(st[16]) or 0
      if tat > from then bk = math.max(bk - math.floor((tat - from) / lei), 0) end
      redis.call('HSET', KEYS[1], 'tat', string.format('%.0f', nx), 'bk', bk)
      redis.call('PUBLISH', ARGV[3], 'e' .. (gen + 2))
    end
  end
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 1000))
  return {0, gen + 2}
end
local ev = tonumber(st[2]) or now
local acc = tonumber(st[3]) or 0
local prev = tonumber(st[1])
local span = (now - ev) / 1000000
-- The rate the server accepted the sends booked since the last event at.
-- They went once the queue booked before it (to qe) had gone, and their
-- successes are told late: a round trip, and the process's next booking.
-- Measured as the successes told over the time since, the rate came out a
-- quarter low half a second after the event (and W with it, while the
-- rate held), and a tenth low from a probe. So it is measured as the rate
-- they went at (those booked, less those still queued ahead) times the
-- share of their answers told so far that were successes.
local start = math.max(ev, tonumber(st[17]) or ev)
local measured = acc / math.max(span, 0.001)
local booked, lei = tonumber(st[16]), tonumber(st[8])
if booked and lei and now > start then
  local ahead = math.max(0, (tonumber(st[14]) or now) - math.max(now, start, tonumber(st[15]) or 0)) / lei
  measured = math.max(booked - ahead, 0) * acc / (acc + rf) / math.max((now - start) / 1000000, 0.001)
end
local fl = st[6] == '1'
local hold = holdFor(now, st[5], st[9], st[10], st[19], st[12] or st[2], st[21]) / 1000000
-- Whether the rate probes: past its hold since the curve began (the
-- event, or the end of the halvings after it).
local curve = (now - (tonumber(st[12]) or ev)) / 1000000
if prev and now - start < 500000 and hold > 0 and not fl and st[19] ~= '1' then
  -- A throttle within half a second of the sends booked since an event
  -- going, while the rate holds, belongs to it: a queueing server answers
  -- the sends it held late, and what was told since is no measure yet.
  -- (Not from a limiter that locked the fleet out: it answers at once,
  -- and a lone success within its lockout had the rest of it ignored,
  -- 40 refused at the old rate.)
  return {0, gen}
end
local W, again, late = nil, 0, 0
if not prev then
  -- A floor: what was accepted since the first send (over a second at
  -- least, fa: the successes of the sends in flight now add to it, as
  -- they are told), or at the rate of the last half second's successes,
  -- no more than the last second's (a burst at once is no rate), or half
  -- the rate the sends were last booked at (a slow start crosses the
  -- limit within its last doubling), no more than twice the last half
  -- second's successes. What the server let through over a whole second
  -- (fc) is kept: if it locks the fleet out at the floor's rate, that is
  -- the limit (see reserveScript).
  local fa = acc / math.max(span, 1)
  W, fl = math.max(fa, math.min(recent(now, 5), lastSecond(now)), halfBooked(now, st[8])), true
  redis.call('HSET', KEYS[1], 'fs', f(math.max(span, 1)), 'fa', f(fa), 'fc', f(math.max(fa, lastSecond(now))), 'f0', string.format('%.0f', ev))
elseif fl or curve > hold then
  -- A probe, or the climb from a floor, crossed the limit. After a climb
  -- (or the first probe after one: a climb's measure may have ended
  -- low, taken over its ramp) the rate of the last 0.3 s of successes
  -- (no more than the last second's) tells it better than the whole
  -- climb; a probe from a limit that held keeps to the successes since
  -- the last event (the server's burst, refilled while the rate held and
  -- spent in a probe's last 0.3 s, would count as rate).
  W, fl = math.max(prev, measured), false
  if st[5] == '1' or st[6] == '1' or st[9] == '1' then W = math.max(W, math.min(recent(now, 3), lastSecond(now))) end
  -- A climb crossed the limit within its last doubling: half the rate it
  -- booked at last is a floor.
  if st[5] == '1' or st[6] == '1' then W = math.max(W, halfBooked(now, st[8])) end
  if st[19] == '1' and st[5] ~= '1' and st[6] ~= '1' then
    -- A probe crossed a limiter that counts the last second's sends,
    -- refused or not: its count holds the probe's excess for a second,
    -- and sends at 0.97·W, as many as leave the count, keep it over the
    -- limit, each refused and counted (3 a probe at 4 processes). The
    -- rate starts again halved, until a send booked after the event
    -- passes, as within a second of an event (below), and its first send
    -- goes an interval of it from now, not now: the count is over the
    -- limit now, and a send let go at once was refused (2 a probe).
    again, late = 1, 1000000 / (lockedBelow * W / 2) -- µs: an interval of the halved rate
  end
elseif st[19] == '1' and span < 1 then
  -- A limiter that locked the fleet out counts the last second's sends,
  -- refused or not: within a second of the last event, what it refuses
  -- is that event's excess, still counted, not a lower limit (measured
  -- so, a probe's crossing of HAProxy's took the limit to 0.28 of it).
  -- The rate starts again halved, not at W: a lockout that lets a lone
  -- send through now and then would have each success start it again
  -- at the limit (19 refused in a quarter second).
  W, again = prev, 1
else
  W = math.min(prev, math.max(measured, prev / 4))
  -- What such a limiter let through over the last second is its limit:
  -- the rate measured after a crossing counts the sends it refused for
  -- the excess still counted (a fleet held at 0.80 of HAProxy's limit
  -- from its second probe on, 30-s runs).
  if st[19] == '1' then W = math.min(prev, math.max(W, lastSecond(now))) end
  if (st[9] ~= '1' or span >= 0.75) and W < 0.5 * prev then
    -- A limit that stood drops (not one the climb found too high):
    -- probe again soon, for it may come back.
    redis.call('HSET', KEYS[1], 'dr', string.format('%.0f', now))
  end
end
if W < 0.5 then W = 0.5 end
-- A limit found anew (more than 5% from the one before) has stood since
-- now; one a probe confirmed stands on (see holdFor).
if (not prev) or math.abs(W - prev) > 0.05 * prev or not st[21] then redis.call('HSET', KEYS[1], 'wf', string.format('%.0f', now)) end
local fd = (not prev) or fl or W > 1.05 * prev
-- The climb from a floor, or a finding, ends here: its measure is fresh.
local fr = (not fd) and (st[5] == '1' or st[6] == '1')
-- The sends booked before the event and not yet gone book again, at the
-- new rate (they hear of it on the key's channel, ARGV[3]): the queue they
-- made is let go, and the new one starts now (or when a pause ends, or
-- late after a probe into a lockout: see above). Not at a first event
-- with fewer than 10 successes told: its floor has little to go on but
-- the successes of the sends booked before it (fa); let go, a floor of 1
-- a second stayed there (burst-1, whose first refusals come with the
-- first sends: 0.02 and 0.14 of L in 2 runs of 5).
local qe = math.max(now + late, tonumber(st[15]) or now)
local letGo = ARGV[3] and (prev or acc >= 10)
if not letGo then qe = math.max(qe, tonumber(st[14]) or now) end
redis.call('HSET', KEYS[1], 'W', f(W), 'ev', string.format('%.0f', now), 'acc', 0, 'gen', gen + 1, 'ep', gen + 1,
  'fd', fd and 1 or 0, 'fl', fl and 1 or 0, 'fr', fr and 1 or 0, 'sp', again, 'cv', string.format('%.0f', now),
  'bk', 0, 'rf', 0, 'qe', string.format('%.0f', qe), 'lg', letGo and 1 or 0)
if letGo and ((tonumber(st[14]) or now) > qe or late > 0) then redis.call('HSET', KEYS[1], 'tat', string.format('%.0f', qe)) end
redis.call('HDEL', KEYS[1], 'fz')
if letGo then redis.call('PUBLISH', ARGV[3], 'e' .. (gen + 1)) end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 1000))
return {1, gen + 1}
