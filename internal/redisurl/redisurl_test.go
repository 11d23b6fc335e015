package redisurl

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		url     string
		display string
		check   func(t *testing.T, tg Target)
	}{
		{"127.0.0.1:7001", "redis://127.0.0.1:7001", func(t *testing.T, tg Target) {
			if !slices.Equal(tg.Option.InitAddress, []string{"127.0.0.1:7001"}) {
				t.Errorf("InitAddress %q", tg.Option.InitAddress)
			}
			if !tg.Option.DisableCache || tg.Option.Dialer.Timeout != DefaultTimeout || tg.Option.ConnWriteTimeout != DefaultTimeout {
				t.Errorf("defaults: DisableCache %v, dial %v, write %v", tg.Option.DisableCache, tg.Option.Dialer.Timeout, tg.Option.ConnWriteTimeout)
			}
			if tg.Option.TLSConfig != nil || tg.Option.Sentinel.MasterSet != "" || len(tg.Secrets) != 0 {
				t.Errorf("a bare address got TLS %v, master set %q, secrets %d", tg.Option.TLSConfig, tg.Option.Sentinel.MasterSet, len(tg.Secrets))
			}
		}},
		{"redis://ops:Open-Sesame-42@10.0.0.1:7002/3", "redis://ops:xxxxx@10.0.0.1:7002/3", func(t *testing.T, tg Target) {
			o := tg.Option
			if o.Username != "ops" || o.Password != "Open-Sesame-42" || o.SelectDB != 3 {
				t.Errorf("user %q, password %q, db %d", o.Username, o.Password, o.SelectDB)
			}
		}},
		{"redis://:Only-Pass-1@h:1", "redis://:xxxxx@h:1", func(t *testing.T, tg Target) {
			if tg.Option.Username != "" || tg.Option.Password != "Only-Pass-1" {
				t.Errorf("user %q, password %q", tg.Option.Username, tg.Option.Password)
			}
		}},
		{"rediss://h:6380?skip_verify=true", "rediss://h:6380?skip_verify=true", func(t *testing.T, tg Target) {
			if tg.Option.TLSConfig == nil || !tg.Option.TLSConfig.InsecureSkipVerify {
				t.Errorf("TLS config %+v", tg.Option.TLSConfig)
			}
		}},
		{"redis://a:1?addr=b:2&addr=c:3&dial_timeout=250ms", "redis://a:1?addr=b:2&addr=c:3&dial_timeout=250ms", func(t *testing.T, tg Target) {
			if !slices.Equal(tg.Option.InitAddress, []string{"a:1", "b:2", "c:3"}) || tg.Option.Sentinel.MasterSet != "" {
				t.Errorf("InitAddress %q, master set %q", tg.Option.InitAddress, tg.Option.Sentinel.MasterSet)
			}
			if tg.Option.Dialer.Timeout != 250*time.Millisecond {
				t.Errorf("dial timeout %v", tg.Option.Dialer.Timeout)
			}
		}},
		{"redis://u:Primary-Pw-7@s1:26379?addr=s2:26379&master_set=jobs&sentinel_username=su&sentinel_password=Sentinel-Pw-8",
			"redis://u:xxxxx@s1:26379?addr=s2%3A26379&master_set=jobs&sentinel_password=xxxxx&sentinel_username=su", func(t *testing.T, tg Target) {
				o := tg.Option
				if o.Sentinel.MasterSet != "jobs" || o.Sentinel.Username != "su" || o.Sentinel.Password != "Sentinel-Pw-8" {
					t.Errorf("sentinel options %+v", o.Sentinel)
				}
				if o.Username != "u" || o.Password != "Primary-Pw-7" {
					t.Errorf("primary user %q, password %q", o.Username, o.Password)
				}
				if !slices.Equal(o.InitAddress, []string{"s1:26379", "s2:26379"}) {
					t.Errorf("InitAddress %q", o.InitAddress)
				}
			}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			tg, err := Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if tg.Display != tc.display {
				t.Errorf("Display %q, want %q", tg.Display, tc.display)
			}
			tc.check(t, tg)
		})
	}
}

// An escaped password is a secret as written and as decoded: a message
// quoting either is redacted.
func TestParseEscapedPassword(t *testing.T) {
	tg, err := Parse("redis://ops:p%40ss%2Fw0rd@h:1")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Option.Password != "p@ss/w0rd" {
		t.Fatalf("password %q", tg.Option.Password)
	}
	for _, msg := range []string{"auth p@ss/w0rd failed", "dialing redis://ops:p%40ss%2Fw0rd@h:1"} {
		if got := tg.Redact(msg); strings.Contains(got, "w0rd") {
			t.Errorf("Redact(%q) = %q", msg, got)
		}
	}
	if strings.Contains(tg.Display, "w0rd") {
		t.Errorf("Display %q shows the password", tg.Display)
	}
}

// Every refused URL is an *Error that names the problem and never shows a
// password.
func TestParseErrorsHidePasswords(t *testing.T) {
	for _, tc := range []struct {
		url, says string
	}{
		{"", "no Redis URL given"},
		{"redis://ops:Wrong/Secret#99@h:1", "malformed URL"},
		{"redis://ops:Secret-99@h:1/x/y", "invalid URL path"},
		{"redis://ops:Secret-99@h:1/zero", "invalid database number"},
		{"ftp://ops:Secret-99@h:1", "invalid URL scheme"},
		{"redis://ops:Secret-99@h:1?dial_timeout=soon", "invalid dial timeout"},
		{"redis://h:1?sentinel_password=Secret-99", "need master_set"},
		{"redis://ops:Secret-99@h:1?sentinel_username=s", "need master_set"},
	} {
		_, err := Parse(tc.url)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", tc.url, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Parse(%q): %q does not say %q", tc.url, err, tc.says)
		}
		if strings.Contains(err.Error(), "Secret") {
			t.Errorf("Parse(%q): %q shows the password", tc.url, err)
		}
		t.Logf("%s -> %v", tc.url, err)
	}
}
