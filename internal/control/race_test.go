//go:build race

package control

// raceDetector reports that the tests run under the race detector, which
// slows the traces of TestGentleKeepsItsTraces twenty-five times over: a
// part of them run under it, and CI runs them all again without it.
const raceDetector = true
