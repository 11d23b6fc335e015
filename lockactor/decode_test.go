package lockactor

import (
	"errors"
	"testing"
	"time"
)

func TestDecodeAcquire(t *testing.T) {
	for _, tc := range []struct {
		desc string
		vals []int64
		want AcquireResult
		err  error
	}{
		{"a fresh grant's short reply, its token", []int64{7}, AcquireResult{Code: Granted, Count: 1, Token: 7}, nil},
		{"the short reply of token 1 is no code", []int64{1}, AcquireResult{Code: Granted, Count: 1, Token: 1}, nil},
		{"a grant in full", []int64{1, 2, 9}, AcquireResult{Code: Granted, Count: 2, Token: 9}, nil},
		{"another kind", []int64{-2}, AcquireResult{Code: Refused, Err: ErrWrongKind}, nil},
		{"held, with its pttl", []int64{0, 500}, AcquireResult{Code: Held, PTTL: 500 * time.Millisecond}, nil},
		{"held without its pttl", []int64{0}, AcquireResult{Code: 0}, errMalformedReply},
		{"empty", nil, AcquireResult{}, errMalformedReply},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := DecodeAcquire(tc.vals)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("DecodeAcquire(%v) = %+v, %v; want %+v, %v", tc.vals, got, err, tc.want, tc.err)
			}
		})
	}
}
