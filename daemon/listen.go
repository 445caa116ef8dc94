package daemon

import (
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/store"
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

// overrideStoreDSN applies sessiond --store-dsn: the DSN replaces
// config.yaml's and SESSIOND_STORE_DSN, and means driver postgres.
func (c *Config) overrideStoreDSN(dsn string) error {
	if dsn == "" {
		return nil
	}
	prev := c.Store
	c.Store = StoreConfig{Driver: string(store.Postgres), DSN: dsn}
	if err := c.Store.validate(); err != nil {
		c.Store = prev
		return fmt.Errorf("--store-dsn: %s", strings.TrimPrefix(err.Error(), "store.dsn: "))
	}
	return nil
}
