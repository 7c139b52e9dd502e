-- inspect.lua reads what the store holds for a key, for a status page
-- (inspectScript, in scripts.go; KEYS and the conventions every script
-- keeps are there). It writes nothing. ARGV: how long a member counts as
-- live in µs. It replies {Redis's clock now in µs, 1 if any of the key's
-- Redis keys exists (else 0), the live members, and the state's fields W,
-- tat and pause as stored (strings, or nil where missing)}: the caller
-- parses the fields, so that what a malformed one means is decided in one
-- place, and reads the instants against now, on the clock of the node
-- that holds the key, as the other scripts do. A member is live as
-- reserve.lua counts it: its last call less than the live time ago. A
-- Redis key of another type than polite's reads as empty.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local live = tonumber(ARGV[1])
local exists = redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3])
if exists == 0 then return {now, 0, 0} end
local st = redis.pcall('HMGET', KEYS[1], 'W', 'tat', 'pause')
if st.err then st = {false, false, false} end
local members = redis.pcall('ZCOUNT', KEYS[3], '(' .. string.format('%.0f', now - live), '+inf')
if type(members) ~= 'number' then members = 0 end
return {now, 1, members, st[1], st[2], st[3]}
