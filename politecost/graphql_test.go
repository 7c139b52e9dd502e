package politecost

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// githubDocQuery is the example of GitHub's documentation ("Predicting
// the point value of a query"): 5,101 requests, 51 points.
const githubDocQuery = `query {
  viewer {
    login
    repositories(first: 100) {
      edges {
        node {
          id

          issues(first: 50) {
            edges {
              node {
                id

                labels(first: 60) {
                  edges {
                    node {
                      id
                      name
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}`

// githubNodesQuery is the "complex query" of GitHub's documentation on
// node limits: 22,060 nodes, 2,102 requests.
const githubNodesQuery = `query {
  viewer {
    repositories(first: 50) {
      edges {
        repository:node {
          name

          pullRequests(first: 20) {
            edges {
              pullRequest:node {
                title

                comments(first: 10) {
                  edges {
                    comment:node {
                      bodyHTML
                    }
                  }
                }
              }
            }
          }

          issues(first: 20) {
            totalCount
            edges {
              issue:node {
                title
                bodyHTML

                comments(first: 10) {
                  edges {
                    comment:node {
                      bodyHTML
                    }
                  }
                }
              }
            }
          }
        }
      }
    }

    followers(first: 10) {
      edges {
        follower:node {
          login
        }
      }
    }
  }
}`

// The requests GitHub's rule counts, and the points, for queries of every
// shape the reader must follow.
func TestGitHubRequests(t *testing.T) {
	tests := []struct {
		name     string
		query    string
		vars     string // JSON
		opName   string
		requests float64
		points   float64
	}{
		{name: "GitHub's example", query: githubDocQuery, requests: 5101, points: 51},
		{name: "GitHub's node-limit example", query: githubNodesQuery, requests: 1 + 50 + 1000 + 50 + 1000 + 1, points: 21},
		{name: "no connection", query: `query { viewer { login } }`, requests: 0, points: 1},
		{name: "shorthand", query: `{ viewer { repositories(first: 10) { nodes { name } } } }`, requests: 1, points: 1},
		{
			name:     "variables",
			query:    `query Q($repos: Int!, $issues: Int, $labels: Int = 5) { viewer { repositories(first: $repos) { nodes { issues(last: $issues) { nodes { labels(first: $labels) { nodes { name } } } } } } } }`,
			vars:     `{"repos": 100, "issues": 50, "labels": 60}`,
			requests: 5101, points: 51,
		},
		{
			name:     "a variable's default",
			query:    `query Q($repos: Int = 100, $issues: Int = 50) { viewer { repositories(first: $repos) { nodes { issues(first: $issues) { nodes { labels(first: 60) { nodes { name } } } } } } } }`,
			requests: 5101, points: 51,
		},
		{
			name:     "a variable not given counts 100",
			query:    `query Q($repos: Int) { viewer { repositories(first: $repos) { nodes { issues(first: 50) { nodes { id } } } } } }`,
			requests: 101, points: 1,
		},
		{
			name:     "first and last: the larger",
			query:    `{ viewer { repositories(first: 10, last: 100) { nodes { issues(first: 50) { nodes { labels(first: 60) { nodes { id } } } } } } } }`,
			requests: 5101, points: 51,
		},
		{
			name: "named fragments, defined after use",
			query: `query { viewer { repositories(first: 100) { nodes { ...Repo } } } }
fragment Repo on Repository { name issues(first: 50) { nodes { ...Issue } } }
fragment Issue on Issue { id labels(first: 60) { nodes { id } } }`,
			requests: 5101, points: 51,
		},
		{
			name:     "inline fragments and directives",
			query:    `query($x: Boolean!) { viewer { repositories(first: 100) @include(if: $x) { nodes { ... on Repository @skip(if: false) { issues(first: 50) { nodes { ... { labels(first: 60) { nodes { id } } } } } } } } } }`,
			requests: 5101, points: 51,
		},
		{
			name:     "aliases count apart",
			query:    `{ viewer { a: repositories(first: 100) { nodes { issues(first: 50) { totalCount } } } b: repositories(first: 100) { nodes { issues(first: 50) { totalCount } } } } }`,
			requests: 202, points: 2,
		},
		{
			name: "comments, strings and block strings hold no syntax",
			query: `# a comment { with braces (first: 1000)
query { search(query: "is:open } { (first: 999)", type: ISSUE, first: 100) { nodes { ... on Issue { body comments(first: 10) { nodes { body } } } } }
  repository(owner: """a "block" } { string""", name: "x\"y") { issues(first: 50) { nodes { id } } } }`,
			requests: 1 + 100 + 1, points: 1,
		},
		{
			name: "the operation named",
			query: `query A { viewer { repositories(first: 100) { nodes { issues(first: 100) { nodes { id } } } } } }
query B { viewer { login } }`,
			opName:   "B",
			requests: 0, points: 1,
		},
		{
			name: "the first operation when none is named",
			query: `query A { viewer { repositories(first: 100) { nodes { issues(first: 100) { nodes { id } } } } } }
query B { viewer { login } }`,
			requests: 101, points: 1,
		},
		{
			name:     "a mutation",
			query:    `mutation($id: ID!) { addStar(input: {starrableId: $id, clientMutationId: "x"}) { starrable { stargazers(first: 10) { totalCount } } } }`,
			vars:     `{"id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5"}`,
			requests: 1, points: 1,
		},
		{
			name:     "fragments that spread themselves count once",
			query:    `{ viewer { repositories(first: 100) { nodes { ...A } } } } fragment A on R { issues(first: 50) { nodes { ...B } } } fragment B on I { ...A labels(first: 2) { nodes { id } } }`,
			requests: 1 + 100 + 5000, points: 51,
		},
		{name: "garbage", query: `}}} {{{ ((( $$$ ... @@@ """ "`, requests: 0, points: 1},
		{name: "empty", query: ``, requests: 0, points: 1},
		{name: "cut short", query: `query { viewer { repositories(first: 100) { nodes { issues(first: 50`, requests: 1 + 100, points: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vars map[string]json.RawMessage
			if tt.vars != "" {
				require.NoError(t, json.Unmarshal([]byte(tt.vars), &vars))
			}
			doc := parseGraphQL(tt.query)
			op, ok := doc.op(tt.opName)
			if tt.query == "" {
				assert.False(t, ok)
			} else {
				require.True(t, ok)
				assert.Equal(t, tt.requests, doc.githubRequests(op, vars))
			}
			body, err := json.Marshal(map[string]any{"query": tt.query, "variables": vars, "operationName": tt.opName})
			require.NoError(t, err)
			assert.Equal(t, tt.points, githubPoints(body))
		})
	}
}

// The reader stays within its bounds on queries built to exhaust it:
// nesting past its depth, fragments that multiply, numbers past float64.
func TestGitHubRequestsBounded(t *testing.T) {
	deep := strings.Repeat("{ a(first: 100) ", 10000) + strings.Repeat("}", 10000)
	doc := parseGraphQL(deep)
	op, ok := doc.op("")
	require.True(t, ok)
	r := doc.githubRequests(op, nil)
	assert.Equal(t, float64(gqlMaxRequests), r, "saturates")

	// Fragment i spreads fragment i+1 twice, 40 deep: 2^40 spreads, each
	// fragment counted once.
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := range 40 {
		next := strconv.Itoa(i + 1)
		b.WriteString("fragment F" + strconv.Itoa(i) + " on T { x(first: 1) { id } a: x { ...F" + next + " } b: x { ...F" + next + " } }\n")
	}
	doc = parseGraphQL(b.String())
	op, ok = doc.op("")
	require.True(t, ok)
	assert.Equal(t, float64(1<<40-1), doc.githubRequests(op, nil))

	// 1e400 is not a float64: a is not read as a connection. A negative
	// size counts 0, a variable not defined 100.
	doc = parseGraphQL(`{ a(first: 1e400) { b(first: -5) { c(first: 7) { id } } } d(first: $nope) { id } }`)
	op, _ = doc.op("")
	assert.Equal(t, 2.0, doc.githubRequests(op, nil))
}
