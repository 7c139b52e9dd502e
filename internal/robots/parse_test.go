package robots

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseRobots(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		agent string
		want  time.Duration
	}{
		{"star group", "User-agent: *\nCrawl-delay: 10\nDisallow: /private", "mybot", 10 * time.Second},
		{"decimal", "User-agent: *\nCrawl-delay: 0.5", "mybot", 500 * time.Millisecond},
		{"capped", "User-agent: *\nCrawl-delay: 3600", "mybot", time.Minute},
		{"request-rate", "User-agent: *\nRequest-rate: 1/5", "mybot", 5 * time.Second},
		{"request-rate with unit", "User-agent: *\nRequest-rate: 2/10s", "mybot", 5 * time.Second},
		{"the longer of both", "User-agent: *\nCrawl-delay: 2\nRequest-rate: 1/5", "mybot", 5 * time.Second},
		{"own group wins", "User-agent: *\nCrawl-delay: 10\n\nUser-agent: MyBot\nCrawl-delay: 1", "mybot", time.Second},
		{"own group without delay wins", "User-agent: *\nCrawl-delay: 10\n\nUser-agent: mybot\nDisallow: /x", "mybot", 0},
		{"group of several agents", "User-agent: other\nUser-agent: MyBot/2.0\nCrawl-delay: 3", "mybot", 3 * time.Second},
		{"another's group", "User-agent: other\nCrawl-delay: 3", "mybot", 0},
		{"comments and case", "# hello\nUSER-AGENT: * # all\ncrawl-DELAY: 4 # seconds", "mybot", 4 * time.Second},
		{"garbage ignored", "User-agent: *\nCrawl-delay: soon\nCrawl-delay: -1\nnonsense\nCrawl-delay: 2", "mybot", 2 * time.Second},
		{"empty", "", "mybot", 0},
		{"CRLF", "User-agent: *\r\nCrawl-delay: 7\r\n", "mybot", 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Parse(strings.NewReader(tt.give), tt.agent))
		})
	}
}

func TestProductToken(t *testing.T) {
	assert.Equal(t, "mybot", ProductToken("MyBot/2.1 (+https://example.com/bot)"))
	assert.Equal(t, "go-http-client", ProductToken("Go-http-client/1.1"))
	assert.Equal(t, "*", ProductToken("*"))
	assert.Equal(t, "", ProductToken(""))
}

func FuzzParseRobots(f *testing.F) {
	for _, seed := range []string{
		"User-agent: *\nCrawl-delay: 10", "User-agent: mybot\nRequest-rate: 1/5", "Crawl-delay: 1e9\n", ":\n:\n", "User-agent:\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, robots string) {
		d := Parse(strings.NewReader(robots), "mybot")
		if d < 0 || d > MaxDelay {
			t.Fatalf("delay %v out of [0, %v]", d, MaxDelay)
		}
	})
}
