//go:build race

package fleet_test

// raceDetector reports that the tests run under the race detector, which
// slows the processes of a fleet test several times over.
const raceDetector = true
