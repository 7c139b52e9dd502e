package polite_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeMaxLines is the README's budget: the front page, not the manual
// (issue 23); the depth lives in docs/.
const readmeMaxLines = 350

// readmeTestCommand is the test command CI runs (with -race): it must stay
// in the README as written.
const readmeTestCommand = "go test -p 1 ./... ./politeotel/... ./politecost/... ./cmd/polite/... ./bench/..."

// quickTierCommand is the quick tier, run before each commit and by CI
// (-count=1 -v): it must stay in the README and CONTRIBUTING.md as written.
const quickTierCommand = "go test -short -p 1 ./... ./politeotel/... ./politecost/... ./cmd/polite/... ./bench/..."

// TestDocsReadme checks the README's shape: at most readmeMaxLines lines,
// the test commands CI runs (the full suite's and the quick tier's, which
// CONTRIBUTING.md gives too), and a link to every guide in docs/.
func TestDocsReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	assert.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines", lines)
	assert.Contains(t, string(readme), "\n"+readmeTestCommand+"\n", "README.md lost the test command CI runs")
	assert.Contains(t, string(readme), "\n"+quickTierCommand+"\n", "README.md lost the quick tier")
	contributing, err := os.ReadFile("CONTRIBUTING.md")
	require.NoError(t, err)
	assert.Contains(t, string(contributing), quickTierCommand, "CONTRIBUTING.md lost the quick tier")

	guides, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, guides)
	linked := map[string]bool{}
	for _, l := range docLinks(string(readme)) {
		target, _, _ := strings.Cut(l.target, "#")
		linked[filepath.Clean(target)] = true
	}
	for _, g := range guides {
		assert.True(t, linked[filepath.Clean(g)], "README.md does not link to %s", g)
	}
}

// TestDocsLinks checks that every relative link of the READMEs (the
// repository's and each module's) and the guides names a file that
// exists, and, into a Markdown file, a heading that it has (GitHub's
// anchors).
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	files = append(files, "README.md", "CONTRIBUTING.md",
		"bench/README.md", "cmd/polite/README.md", "politecost/README.md", "politeotel/README.md")
	for _, file := range files {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, l := range docLinks(string(text)) {
			target, anchor, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", file, l.line, l.target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			doc, err := os.ReadFile(path)
			require.NoError(t, err)
			if !docAnchors(string(doc))[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading with anchor #%s", file, l.line, l.target, path, anchor)
			}
		}
	}
}

func TestDocsAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start": "quick-start",
		"What the goals ask (issue 19), and what is met":                "what-the-goals-ask-issue-19-and-what-is-met",
		"On the bench's real servers":                                   "on-the-benchs-real-servers",
		"The dialects of `politecost`":                                  "the-dialects-of-politecost",
		"2026-11-28 (second): a stated window from the first second":    "2026-11-28-second-a-stated-window-from-the-first-second",
		"Crawling: millions of hosts, each treated politely":            "crawling-millions-of-hosts-each-treated-politely",
		"Already using go-retryablehttp?":                               "already-using-go-retryablehttp",
		"snake_case and **bold**":                                       "snake_case-and-bold",
		"Faults, hostile servers, secrets and load":                     "faults-hostile-servers-secrets-and-load",
		"GCRA 200 → 50 → 200":                                           "gcra-200--50--200",
		"Memory and contention":                                         "memory-and-contention",
		"A fleet that learns the limit together: the shared controller": "a-fleet-that-learns-the-limit-together-the-shared-controller",
	} {
		assert.Equal(t, want, docAnchor(heading), heading)
	}
}

// docLink is a relative link of a Markdown file: its target (a path, a
// path#anchor or #anchor) and the line it is on.
type docLink struct {
	target string
	line   int
}

var (
	// docLinkRE matches the target of an inline link or image: ](target).
	docLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// docCodeSpanRE matches an inline code span.
	docCodeSpanRE = regexp.MustCompile("`[^`\n]*`")
)

// docLinks returns the relative links of a Markdown text, outside fenced
// code blocks and code spans; links to the web are not followed.
func docLinks(text string) []docLink {
	var links []docLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = docCodeSpanRE.ReplaceAllString(line, "")
		for _, m := range docLinkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, docLink{target: target, line: i + 1})
		}
	}
	return links
}

// docAnchors returns the anchors GitHub gives the headings of a Markdown
// text: the second heading of a name gets -1, the third -2, and so on.
func docAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := docAnchor(heading)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// docAnchor is GitHub's anchor of a heading: lower case, every character
// but letters, digits, spaces, '-' and '_' dropped, spaces made '-'.
func docAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
