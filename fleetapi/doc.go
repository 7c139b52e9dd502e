// Package fleetapi is the contract between a
// [github.com/politehttp/polite.Transport] and a shared store of pacing
// state: a [Fleet], in which the Transports of many processes book their
// sends to one API, so that together they keep to one quota, share the
// pauses a server asks for, and, if the fleet runs one, pace by one
// shared controller.
//
// Package [github.com/politehttp/polite/fleet] implements it on Redis.
// Users of polite need this package only to write a fleet of their own,
// on another store: a type that implements [Fleet] (and [Congestion], if
// its shared controller tells of congestion events as they happen, and
// [Overtaking], if a send of a higher priority may take a place ahead of
// those booked before it), given
// to each Transport with [github.com/politehttp/polite.WithFleet].
//
// The Transport asks its Fleet for each send with a [Request] (the limits
// that hold for the whole fleet) and waits as the [Grant] says; it tells
// the fleet of the server's pauses ([Fleet.Pause]) and throttles
// ([Fleet.Throttled]), and of what sends in units other than requests
// gave back ([Fleet.Adjust]). A Fleet whose store cannot answer returns an
// error, and the Transport paces on its own until it answers again.
//
// The package imports nothing but the standard library.
package fleetapi
