// The programs that polite's CI runs on this repository: modproxy, which
// stands in for the module proxy before a release's tags exist, and
// apidiff, which compares the exported API with the last release; and
// structure, which measures the structure of the core (not run by CI). A
// module of their own, so that golang.org/x/mod, golang.org/x/exp and
// golang.org/x/tools never enter the go.mod of the library or of its
// users. Not part of the workspace.
module politeci

go 1.26.0

require (
	golang.org/x/mod v0.42.0
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a
)

require (
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
	golang.org/x/sync v0.24.0 // indirect
)

tool golang.org/x/exp/cmd/apidiff
