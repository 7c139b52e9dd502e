package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// readURLs returns the URLs to fetch: those of the file input (stdin for
// "-"), or those of stdin when args is just "-", or else args as they are.
// All are read before the run starts, so that the progress bar knows the
// total.
func readURLs(input string, args []string, stdin io.Reader) ([]string, error) {
	switch {
	case input == "-" || (input == "" && len(args) == 1 && args[0] == "-"):
		urls, err := scanURLs(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading the URLs from stdin: %w", err)
		}
		return urls, nil
	case input != "":
		f, err := os.Open(input)
		if err != nil {
			return nil, fmt.Errorf("reading the URLs: %w", err)
		}
		defer f.Close()
		urls, err := scanURLs(f)
		if err != nil {
			return nil, fmt.Errorf("reading the URLs from %s: %w", input, err)
		}
		return urls, nil
	}
	return args, nil
}

// scanURLs returns the URLs of r, one a line, trimmed of spaces; blank
// lines and lines starting with # are skipped.
func scanURLs(r io.Reader) ([]string, error) {
	var urls []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		urls = append(urls, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return urls, nil
}
