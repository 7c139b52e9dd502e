//go:build race

package main

// raceDetector reports that the tests run under the race detector, which
// slows the fake-time runs of the LLM bench several times over.
const raceDetector = true
