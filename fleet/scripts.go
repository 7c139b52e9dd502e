package fleet

import "github.com/redis/go-redis/v9"

// The scripts work in integer microseconds of Redis's own clock (TIME),
// never the processes' clocks; a microsecond count since 1970 is exact in
// a Lua number (a double) until the year 2255. Numbers are written with
// string.format('%.0f'), since Lua's own conversion keeps 14 digits only,
// and returned as integers, since Redis truncates Lua numbers in replies.
// Every write sets a TTL. Control flow is in status codes, never in
// errors.
//
// The keys of one polite key share a hash tag, so that one script call
// touches one Cluster slot:
//
//	KEYS[1] <ns>:v1:{<key>}:s  hash: tat (the GCRA's theoretical arrival
//	                           time), pause (no send before), seq
//	KEYS[2] <ns>:v1:{<key>}:w  sorted set: the window's booked sends
//	KEYS[3] <ns>:v1:{<key>}:m  sorted set: member → its last call

// reserveScript books sends. ARGV: the emission interval in µs (0: no
// pacing), the burst, the window's n (0: none) and length in µs, the
// longest wait accepted in µs (-1: any), the member, how long a member
// counts as live in µs, how long the state outlives its last use in µs,
// the sends to book (a lease; 1 with a window), whether the shared
// controller paces (1 or 0), the successes to count for it ("gen:n" for
// each generation their sends were booked under, comma-separated), and the
// earliest the first send may go, from now, in µs (0: at once); then the
// number of units the send costs something in besides a request, and for
// each its name, the amount, the µs a unit takes to refill and the
// quota's limit (see costArgs). It replies {granted (1 or 0), wait µs,
// pause left µs, live members, the controller's generation, the interval
// used in µs}.
//
// The first send's instant is the latest of: now, the GCRA's slot (TAT −
// (burst−1)·interval), the pause's end, and, with a window, the n-th
// newest booking plus the window's length (bookings are monotonic, so
// only that window need be checked); and, for each unit the send costs
// something in, the instant that unit's bucket holds the amount: each
// unit is a GCRA of its own (field c.<unit>, its TAT), whose capacity is
// the quota's limit, so that a cost taken is the TAT moved on by the
// amount's refill time and one booked when the bucket is short waits for
// the bookings ahead of it, across the fleet, first come first served. A
// send is booked in every unit or none. A unit's refill time is kept
// (field e.<unit>): when the quota's rate changes (a window learnt), what
// the bucket lacks, in units, stays what it was. A cost's bucket found full
// (or full within 100 ms of the slot) is taken as full until 100 ms after
// the slot: the server's bucket stays full, and refills nothing, until the
// send reaches it, which a bucket refilled from the slot on would count as
// free (a few ms of refill at each start from full, never corrected,
// since what the answers say is left cannot tell it from the sends booked
// ahead: 1.6-1.9% of a fleet's sends refused on Azure OpenAI's fake in
// the LLM bench). 100 ms of refill is the price, once at each start from
// full. A lease of k sends books k
// consecutive slots of the GCRA, one interval apart from the first: each
// conforms as a send booked alone would, so that a lease spent at its
// spacing keeps the fleet within the GCRA. A wait over the longest
// accepted books nothing.

// recentLua is Lua shared by reserveScript and congestScript: lockedBelow,
// holdFor, the shared controller's successes in bins of 100 ms of Redis's
// clock (fields r0..r9, by the bin's index modulo 10; rb the newest bin
// told of), and recent, the rate at which the last k bins (the current one
// partial) saw them.
const recentLua = `
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
-- dropped to less than half at dr (µs; nil if none), 15% of the time since
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
  if dr and now - dr < 4000000 / 0.15 then return math.max(750000, 0.15 * (now - dr)) end
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
`

var reserveScript = redis.NewScript(recentLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ei, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local n, per = tonumber(ARGV[3]), tonumber(ARGV[4])
local maxwait, member = tonumber(ARGV[5]), ARGV[6]
local live, grace = tonumber(ARGV[7]), tonumber(ARGV[8])
local cost = tonumber(ARGV[9])
local adaptive = tonumber(ARGV[10])
local notbefore = tonumber(ARGV[12]) or 0
local f = function(x) return string.format('%.0f', x) end
local transit = 100000 -- µs: a cost's bucket is taken as full until then after a slot
local costs = {}
for i = 1, (tonumber(ARGV[13]) or 0) do
  local b = 13 + (i - 1) * 4
  local c = {field = 'c.' .. ARGV[b + 1], amount = tonumber(ARGV[b + 2]), ei = tonumber(ARGV[b + 3]), cap = tonumber(ARGV[b + 4])}
  local st = redis.call('HMGET', KEYS[1], c.field, 'e.' .. ARGV[b + 1])
  c.tat = tonumber(st[1]) or now
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

local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'W', 'ev', 'gen', 'fd', 'lei', 'sp', 'cv', 'fl', 'fr', 'ssb', 'ssbt', 'dr', 'ep', 'fs', 'fa', 'fz', 'fc', 'lk', 'wf')
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
local slot = now
if ei > 0 and tat - (burst - 1) * ei > slot then slot = tat - (burst - 1) * ei end
if pause > slot then slot = pause end
if notbefore > 0 and now + notbefore > slot then slot = now + notbefore end
for _, c in ipairs(costs) do
  local at = c.tat + (c.amount - c.cap) * c.ei
  if at > slot then slot = at end
end
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
if paced then
  -- A send the shared controller would book far ahead is not booked: it
  -- asks again in a while. The controller's rate may rise meanwhile
  -- (it doubles every half second while finding the limit), and a
  -- send booked at a slot of the old rate would sleep until it.
  local horizon = 250000
  if st[6] ~= '1' and st[3] then horizon = math.max(1000000, 4 * ei) end
  local gslot = tat - (burst - 1) * ei
  if gslot > pause and gslot - now > horizon and (maxwait < 0 or maxwait > horizon) then
    redis.call('PEXPIRE', KEYS[1], math.ceil(grace / 1000))
    return {2, horizon, paused, members, gen, ei}
  end
end
if maxwait >= 0 and slot - now > maxwait then
  if adaptive == 1 then redis.call('PEXPIRE', KEYS[1], math.ceil(grace / 1000)) end
  return {0, slot - now, paused, members, gen, ei}
end

local keep = now
if ei > 0 then
  if slot > tat then tat = slot end
  tat = tat + cost * ei
  redis.call('HSET', KEYS[1], 'tat', f(tat))
  keep = tat
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
  redis.call('HSET', KEYS[1], c.field, f(c.tat), 'e.' .. string.sub(c.field, 3), string.format('%.17g', c.ei))
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
return {1, slot - now, paused, members, gen, ei}
`)

// pauseScript holds the key's sends for a while. ARGV: the pause in µs,
// the emission interval in µs (0: none), the burst, the state's grace in
// µs, and the channel to publish the pause on (µs left). The pause never shortens a longer one, and the GCRA's TAT moves
// to the pause's end plus burst−1 intervals, so that the sends after the
// pause are spaced by the interval from its end: the fleet resumes
// without a burst. It replies the pause left, in µs.
var pauseScript = redis.NewScript(`
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
`)

// congestScript records a throttle of the shared controller: of a send
// booked under generation ARGV[1]. ARGV[2] is the state's grace in µs. It
// replies {1 if it was a new congestion event, the generation now}.
//
// The generation works as [polite.Gentle]'s phase: an event makes it odd
// (ep, the generation right after it), the first success of a send
// booked since makes it even, and a halving moves it on by 2, odd still.
// So a throttle tells where its send went: before the last event (in
// flight at it: the same overload, which three processes throttled at
// once count once), after it but before anything passed again, or after
// both. Only the last is a congestion event; the second shows the server
// still refusing at the new rate (a spent window, a limiter that counts
// refusals), which is no measure: the rate halves, once per generation
// (the sends booked before a halving do not halve again), until a
// success, and the hold starts again. Halvings from a first floor that
// last (two or more) show a limiter that counts refusals and locks out a
// client above its limit (HAProxy's): the floor's rate was above the
// limit, and what the server let through over the first whole second is
// taken for it (see reserveScript).
//
// As Gentle does, an event measures the limit W as the rate the server
// accepted the sends booked since the last event at (the rate they went
// at, times the share of their answers told so far that were successes:
// their successes are told late, see measured below); the first event
// gives a floor (the successes over at least a second), from which the
// rate probes at once; an event while the rate probes (or while the limit is being
// found) can only raise W; one while it holds lowers W, at most 4 times.
// The rate (in reserveScript) holds at 0.99·W from the last event or
// halving for as long as W had stood then, 4 seconds at least and 30 at
// most (after a limit that stood dropped to less than half, for 15% of
// the time since the drop; as Gentle's: see holdFor), then doubles every
// second, or every half second while
// finding (Gentle's doubles every quarter second, at most: a fleet's
// successes are told late, with each process's next booking, and its
// throttles a round trip late, by which time a climb twice as fast had
// gone on past the limit: 11-13% of a fleet of 4's requests refused on
// burst-1 against 5-9%). Unlike Gentle's, a probe stays at 1.1·W for a
// second before it doubles on, and never speeds up past it: a fleet holds
// many sends booked ahead, which go at the rate they were booked at, and
// a probe that sped up while a server's burst hid the crossing had them
// refused (9 a probe at 4 processes, 24 at 16, against 2 and 3).
var congestScript = redis.NewScript(recentLua + `
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
`)

// adjustScript tells a key's cost buckets (see reserveScript) what the
// sends booked before gave back, and the most each can hold now. ARGV:
// how long the state outlives its last use in µs, the number of units,
// and for each its name, what was given back (below 0: taken), the µs a
// unit takes to refill, the quota's limit, and the most the bucket can
// hold now (-1: no bound; else at least 0). A bucket never holds more than
// its limit: what is given back to a full one is lost, as a server's
// refund to a full bucket is. It replies the number of units adjusted.
var adjustScript = redis.NewScript(`
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
`)
