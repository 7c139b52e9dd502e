//go:build !linux

package main

import "syscall"

// childAttr returns the default attributes: only Linux can tie a child's
// life to the bench's.
func childAttr() *syscall.SysProcAttr { return nil }
