-- lanes.lua is the Lua that reserveScript has between recent.lua and
-- reserve.lua: the key's lanes, by which a send of a higher priority
-- overtakes the sends of lower ones booked ahead of it in the key's GCRA.
--
-- The lanes (field ln of the state's hash, "priority:µs" comma-separated)
-- hold, for each priority that has a send booked still to come, the slot
-- of its last one; lane 128, above every priority, holds the last slot of
-- the sends that cannot move (a lease's, the sends a process owes, a
-- window's: see reserve.lua). A send of priority p that would be booked
-- behind sends of lower priorities takes the first slot of the schedule
-- after every send of p or higher still to come, after now and the
-- guard, and after the pause, the earliest it may go and its costs'
-- instants: every send of a lower priority at that slot or after goes one
-- interval later, and the GCRA's TAT moves on by one interval, as if the
-- send had been booked before them. The overtaking is counted (field ov)
-- and published on the key's channel ("o<count>:<priority>:<slot
-- µs>:<interval µs>"): the sends it delays, asleep until their slots in
-- any process, hear of it and go that much later
-- (fleetapi.Overtaking). The slot is one of the schedule's, TAT less a
-- whole number of intervals, so that the sends around it stay an
-- interval apart. The guard (an interval, between 1 and 5 ms) is the
-- time the message takes to reach the processes: a send at the slot
-- wakes no sooner than that after it was published.
--
-- The floor: at most floorTurns − 1 sends overtake in any floorTurns
-- intervals of the schedule (field ot, the slots of the last of them), so
-- that under a load of higher priorities that would take every slot, the
-- lower ones still get a slot in floorTurns, as each process's queue
-- keeps them (gate.FloorTurns). A send that would overtake sooner
-- overtakes at the first slot the floor leaves it, or books in order.

-- immovable is the lane of the sends that cannot move.
local immovable = 128

-- floorTurns is gate.FloorTurns: the lower priorities' floor.
local floorTurns = 10

-- readSlots returns the slots of field ot, oldest first.
local function readSlots(s)
  local slots = {}
  for at in string.gmatch(s or '', '(%d+)') do slots[#slots + 1] = tonumber(at) end
  table.sort(slots)
  return slots
end

-- readLanes returns the lanes of field ln, forgetting those whose last
-- send has gone by (before now).
local function readLanes(s, now)
  local lanes = {}
  for p, at in string.gmatch(s or '', '(-?%d+):(%d+)') do
    at = tonumber(at)
    if at >= now then lanes[tonumber(p)] = at end
  end
  return lanes
end

-- writeLanes writes the lanes back to field ln of key.
local function writeLanes(key, lanes)
  local parts = {}
  for p, at in pairs(lanes) do parts[#parts + 1] = p .. ':' .. string.format('%.0f', at) end
  if #parts == 0 then
    redis.call('HDEL', key, 'ln')
  else
    redis.call('HSET', key, 'ln', table.concat(parts, ','))
  end
end

-- overtakeGuard returns the guard for an emission interval of ei µs.
local function overtakeGuard(ei)
  return math.min(math.max(ei, 1000), 5000)
end

-- overtakeAt returns the slot at which a send of priority prio overtakes
-- the sends of lower priorities booked ahead of it, or nil if it does not:
-- none of theirs is at that slot or after, or the send's own slot in the
-- GCRA (slot) is no later. least is the earliest it may go for the
-- pause, the earliest it was asked to go at and its costs; tat the
-- GCRA's TAT, ei its interval; recent the slots of the last overtakings,
-- oldest first (see the floor, above).
local function overtakeAt(lanes, prio, now, ei, tat, slot, least, recent)
  local from = math.max(least, now + overtakeGuard(ei))
  if #recent >= floorTurns - 1 then
    local bound = recent[#recent - floorTurns + 2] + floorTurns * ei
    if from < bound then from = bound end
  end
  local low = nil
  for p, at in pairs(lanes) do
    if p >= prio then
      -- A send of this priority or a higher one keeps its place.
      if at + ei > from then from = at + ei end
    elseif low == nil or at > low then
      low = at
    end
  end
  if low == nil then return nil end
  local at = tat - math.floor((tat - from) / ei) * ei
  if at < from then at = at + ei end
  if at >= slot or low < at then return nil end
  return at
end

-- overtake books a send of priority prio at slot at, ahead of the sends
-- of lower priorities (see overtakeAt): their lanes move on by ei, the
-- overtaking is counted in field ov of key (was ov), its slot kept with
-- the recent ones for the floor, and published on channel. It returns the
-- count.
local function overtake(key, channel, lanes, prio, at, ei, ov, recent)
  for p, last in pairs(lanes) do
    if p < prio and last >= at then lanes[p] = last + ei end
  end
  recent[#recent + 1] = at
  table.sort(recent)
  local kept = {}
  for i = math.max(#recent - floorTurns + 2, 1), #recent do kept[#kept + 1] = string.format('%.0f', recent[i]) end
  ov = ov + 1
  redis.call('HSET', key, 'ov', ov, 'ot', table.concat(kept, ','))
  redis.call('PUBLISH', channel, 'o' .. ov .. ':' .. prio .. ':' .. string.format('%.0f', at) .. ':' .. ei)
  return ov
end
