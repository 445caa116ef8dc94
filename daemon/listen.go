package daemon

import (
	"fmt"
	"strings"
)

// overrideListen replaces c.Listen with addr (sessiond --listen) when addr
// is not empty, with the same check as config.yaml's listen: a loopback
// host and a port.
func (c *Config) overrideListen(addr string) error {
	if addr == "" {
		return nil
	}
	prev := c.Listen
	c.Listen = addr
	if err := c.Validate(); err != nil {
		c.Listen = prev
		return fmt.Errorf("--listen: %s", strings.TrimPrefix(err.Error(), "listen: "))
	}
	return nil
}
