package limiter

import (
	"context"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestRedisOlderThanTheScriptsIsRefusedNamingBothVersions(t *testing.T) {
	g := NewWithT(t)
	for _, ok := range []string{"5.0.0", "6.2.14", "7.0.15", "7.4.2", "8.0.0", "not.a.version"} {
		g.Expect(versionAcceptable("# Server\r\nredis_version:"+ok+"\r\nredis_mode:standalone\r\n")).To(Succeed(), ok)
	}
	for _, old := range []string{"4.0.14", "3.2.12", "2.8.24"} {
		err := versionAcceptable("# Server\r\nredis_version:" + old + "\r\n")
		g.Expect(err).To(MatchError(ErrRedisTooOld), old)
		g.Expect(err).To(MatchError(ContainSubstring("runs Redis " + old + ", and Sluice's scripts need 5.0.0 or newer")))
	}
	g.Expect(versionAcceptable("# Server\r\nredis_mode:standalone\r\n")).To(Succeed(), "no version line: nothing to refuse on")
}

// A user whose ACL does not allow INFO still decides: the version check
// steps aside rather than refusing every connection.
func TestVersionCheckStepsAsideForAnACLWithoutInfo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	admin := standalone.Client()
	g.Expect(admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info").Err()).To(Succeed())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", "noinfo").Err() })

	u, err := url.Parse(standalone.URL())
	g.Expect(err).NotTo(HaveOccurred())
	u.User = url.UserPassword("noinfo", "pw")
	r := newRedis(t, u.String())
	g.Expect(r.client.Info(ctx, "server").Err()).To(MatchError(ContainSubstring("NOPERM")), "the user may not read INFO")
	d := allow(t, r, Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1, Windows: []Window{{Requests: 2, Period: time.Minute}}})
	g.Expect(d.Allowed).To(BeTrue())
	g.Expect(d.Remaining).To(BeEquivalentTo(1))
}
