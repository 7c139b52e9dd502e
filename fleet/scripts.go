package fleet

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

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
//	                           time), pause (no send before), seq, ln and
//	                           ov (the priorities' lanes, lua/lanes.lua)
//	KEYS[2] <ns>:v1:{<key>}:w  sorted set: the window's booked sends
//	KEYS[3] <ns>:v1:{<key>}:m  sorted set: member → its last call
//
// Each script's Lua is a file of lua/, embedded: the comments it begins
// with say its ARGV, its reply and how it works. A script that begins with
// recent.lua is that file's Lua and then its own.

// recentLua is the Lua that reserveScript and congestScript begin with:
// the shared controller's successes of the last second, and how long it
// holds a limit it found (lua/recent.lua).
//
//go:embed lua/recent.lua
var recentLua string

// reserveScript books a key's sends: in its GCRA, its window, its cost
// buckets and at its shared controller's rate, a send of a higher
// priority ahead of those of lower ones (lua/recent.lua, lua/lanes.lua,
// then lua/reserve.lua).
var reserveScript = redis.NewScript(recentLua + lanesLua + reserveLua)

//go:embed lua/lanes.lua
var lanesLua string

//go:embed lua/reserve.lua
var reserveLua string

// pauseScript holds a key's sends for a while, and publishes the pause
// (lua/pause.lua).
var pauseScript = redis.NewScript(pauseLua)

//go:embed lua/pause.lua
var pauseLua string

// congestScript records a throttle of a send the shared controller booked,
// and the congestion event it may be (lua/recent.lua, then
// lua/congest.lua).
var congestScript = redis.NewScript(recentLua + congestLua)

//go:embed lua/congest.lua
var congestLua string

// adjustScript tells a key's cost buckets what the sends booked before gave
// back, and the most each can hold now (lua/adjust.lua).
var adjustScript = redis.NewScript(adjustLua)

//go:embed lua/adjust.lua
var adjustLua string

// inspectScript reads what Redis holds for a key, on Redis's clock, and
// writes nothing (lua/inspect.lua).
var inspectScript = redis.NewScript(inspectLua)

//go:embed lua/inspect.lua
var inspectLua string
