package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemoCheck(t *testing.T) {
	rep := demoReport{Results: []demoResult{
		{Scenario: "bucket", Client: clientPolite, Utilization: 0.97, RejectedPct: 1},
		{Scenario: "window", Client: clientPolite, Utilization: 0.91, RejectedPct: 2.9},
		{Scenario: "bucket", Client: clientPlain, Utilization: 1, RejectedPct: 80},
		{Scenario: "drop", Client: clientPolite, Utilization: 0.5, RejectedPct: 9},
	}}
	assert.NoError(t, rep.check(), "plain's refusals and the drop scenario are not checked")

	rep.Results[0].Utilization = 0.79
	rep.Results[1].RejectedPct = 3.1
	err := rep.check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "polite on bucket: 0.79 of the limit")
	assert.Contains(t, err.Error(), "polite on window: 0.91 of the limit with 3.1% refused")
}
