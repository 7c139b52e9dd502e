//go:build !race

package polite_test

// raceDetector reports that the tests run under the race detector, which
// slows the fake-time suites several times over: the longest run scaled
// down under it, and CI runs them again without it, in full.
const raceDetector = false
