/* tests/s3/s3gw_helper.h, the C side of the S3 test harness, against the
 * shared gateway (or one of its own outside CTest): signed requests and
 * what they find, refusals of wrong keys and other users, a gateway of the
 * test's own stopped and restarted on the same cluster, the fault proxy's
 * rules and counters through the helper, and that the shared gateway cannot
 * be stopped from a test. */
#include "s3gw_helper.h"

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (char)(seed >> 16);
	}
}

int main(void)
{
	char *tmp = t_tmpdir("s3helper");
	s3gw g;
	s3gw_open(&g, tmp);
	T_ASSERT(!strncmp(g.endpoint, "http://127.0.0.1:", 17) && g.port > 0);

	char b[64];
	s3gw_new_bucket(&g, "helper", b, sizeof(b));
	size_t n = 1 << 20;
	char *data = malloc(n);
	T_ASSERT(data);
	fill(data, n, 42);

	/* round trip, listing, multipart bookkeeping */
	T_ASSERT(s3gw_put(&g, b, "dir/one", data, n) == 200);
	T_ASSERT(s3gw_put(&g, b, "dir/two", data, 10) == 200);
	T_ASSERT(s3gw_put(&g, b, "other", data, 10) == 200);
	s3gw_buf out = { 0 };
	T_ASSERT(s3gw_get(&g, b, "dir/one", &out) == 200);
	T_ASSERT(out.len == n && memcmp(out.data, data, n) == 0);
	s3gw_buf_free(&out);
	T_ASSERT(s3gw_count_objects(&g, b, "dir/") == 2);
	T_ASSERT(s3gw_count_objects(&g, b, "") == 3);
	T_ASSERT(s3gw_count_uploads(&g, b, "") == 0);
	char path[512];
	snprintf(path, sizeof(path), "/%s/dir/mp?uploads=", b);
	T_ASSERT(s3gw_req(&g, "POST", path, NULL, 0, NULL, &out) == 200);
	char *id = strstr(out.data, "<UploadId>");
	T_ASSERT(id);
	id += strlen("<UploadId>");
	*strchr(id, '<') = 0;
	T_ASSERT(s3gw_count_uploads(&g, b, "dir/") == 1);
	T_ASSERT(s3gw_count_uploads(&g, b, "nothing/") == 0);
	char enc[256];
	s3gw_qenc(id, enc, sizeof(enc));
	snprintf(path, sizeof(path), "/%s/dir/mp?uploadId=%s", b, enc);
	T_ASSERT(s3gw_req(&g, "DELETE", path, NULL, 0, NULL, NULL) == 204);
	s3gw_buf_free(&out);
	T_ASSERT(s3gw_count_uploads(&g, b, "dir/") == 0);

	/* a flipped byte in the store: exactly one, where asked */
	s3gw_flip_byte(&g, b, "dir/one", 1000);
	T_ASSERT(s3gw_get(&g, b, "dir/one", &out) == 200 && out.len == n);
	size_t diffs = 0;
	for (size_t i = 0; i < n; i++)
		diffs += out.data[i] != data[i];
	T_ASSERT(diffs == 1 && (out.data[1000] ^ data[1000]) == 1);
	s3gw_buf_free(&out);

	/* refusals: a wrong secret, another user, a missing bucket */
	snprintf(path, sizeof(path), "/%s/other", b);
	T_ASSERT(s3gw_req_as(&g, g.access, "not-the-secret", "GET", path, NULL, 0, NULL, &out) == 403);
	T_ASSERT(out.data && strstr(out.data, "SignatureDoesNotMatch"));
	s3gw_buf_free(&out);
	char ak[64], sk[96], uid[32];
	snprintf(uid, sizeof(uid), "other%d", (int)getpid());
	s3gw_user(&g, uid, ak, sizeof(ak), sk, sizeof(sk));
	T_ASSERT(strcmp(ak, g.access) != 0);
	T_ASSERT(s3gw_req_as(&g, ak, sk, "GET", path, NULL, 0, NULL, &out) == 403);
	T_ASSERT(out.data && strstr(out.data, "AccessDenied"));
	s3gw_buf_free(&out);
	T_ASSERT(g.other_access[0] && strcmp(g.other_access, g.access) != 0 && g.min_part >= 1 << 20);
	T_ASSERT(s3gw_req_as(&g, g.other_access, g.other_secret, "GET", path, NULL, 0, NULL, NULL) == 403);
	T_ASSERT(s3gw_get(&g, "no-such-bucket-here", "k", &out) == 404);
	T_ASSERT(out.data && strstr(out.data, "NoSuchBucket"));
	s3gw_buf_free(&out);

	/* a gateway of the test's own: killed, refused, restarted, data kept */
	s3gw x;
	s3gw_gw_add(&g, "helper", &x);
	T_ASSERT(x.port != g.port);
	T_ASSERT(s3gw_get(&x, b, "other", &out) == 200 && out.len == 10);
	s3gw_buf_free(&out);
	s3gw_gw_stop(&x, 1);
	long st = s3gw_get(&x, b, "other", &out);
	/* Refused, as a rule; on a loaded machine the connection may also be
	 * reset or time out, or another test's server have taken the freed
	 * port: anything but the object. */
	if (!(st < 0 || (st != 200 && !(out.len == 10 && !memcmp(out.data, data, 10)))))
		T_FAIL("the killed gateway's port still served the object (status %ld)", st);
	if (st != -(long)CURLE_COULDNT_CONNECT)
		fprintf(stderr, "note: the killed gateway's port gave %ld, not a refused connection\n", st);
	s3gw_buf_free(&out);
	T_ASSERT(s3gw_get(&g, b, "other", NULL) == 200); /* the shared one is untouched */
	s3gw_gw_start(&x);
	T_ASSERT(s3gw_get(&x, b, "other", &out) == 200 && out.len == 10 && !memcmp(out.data, data, 10));
	s3gw_buf_free(&out);
	s3gw_gw_stop(&x, 0);

	/* the shared gateway cannot be stopped from a test */
	if (!g.own) {
		pid_t pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);
			dup2(fd, 2);
			s3gw_gw_stop(&g, 1);
			_exit(0);
		}
		int ws;
		T_ASSERT(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == T_EXIT_FAIL);
		T_ASSERT(s3gw_get(&g, b, "other", NULL) == 200);
	}

	/* the proxy through the helper */
	s3proxy p;
	s3proxy_start(&p, &g, tmp);
	s3gw via = g;
	snprintf(via.endpoint, sizeof(via.endpoint), "%s", p.endpoint);
	int r1 = s3proxy_rule(&p, "{\"kind\":\"PUT\",\"action\":\"status\",\"status\":503,\"times\":2}");
	int r2 = s3proxy_rule(&p, "{\"kind\":\"GET\",\"action\":\"reset\"}");
	T_ASSERT(r1 > 0 && r2 > r1);
	T_ASSERT(s3gw_put(&via, b, "via", data, 100) == 503);
	T_ASSERT(s3gw_put(&via, b, "via", data, 100) == 503);
	T_ASSERT(s3gw_put(&via, b, "via", data, 100) == 200);
	T_ASSERT(s3gw_get(&via, b, "via", NULL) == -(long)CURLE_RECV_ERROR);
	T_ASSERT(s3gw_get(&via, b, "via", &out) == 200 && out.len == 100);
	s3gw_buf_free(&out);
	T_ASSERT(s3gw_count_objects(&via, b, "") == 4);
	T_ASSERT(s3proxy_count(&p, "PUT", "503") == 2);
	T_ASSERT(s3proxy_count(&p, "PUT", NULL) == 3);
	T_ASSERT(s3proxy_count(&p, "GET", NULL) == 2);
	T_ASSERT(s3proxy_count(&p, "lists", NULL) == 1);
	T_ASSERT(s3proxy_wait(&p, "PUT", 3, 5) == 0);
	T_ASSERT(s3proxy_wait(&p, "PUT", 4, 1) == -ETIMEDOUT);
	s3proxy_reset(&p);
	T_ASSERT(s3proxy_count(&p, "requests", NULL) == 0);
	s3proxy_rule(&p, "{\"kind\":\"HEAD\",\"action\":\"hold\"}");
	pid_t child = fork();
	T_ASSERT(child >= 0);
	if (child == 0)
		_exit(s3gw_req(&via, "HEAD", path, NULL, 0, NULL, NULL) == 200 ? 0 : 1);
	T_ASSERT(s3proxy_wait(&p, "held", 1, 30) == 0);
	s3proxy_release(&p);
	int ws;
	T_ASSERT(waitpid(child, &ws, 0) == child && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	T_ASSERT(s3proxy_count(&p, "HEAD", "200") == 1);
	s3proxy_stop(&p);

	free(data);
	s3gw_close(&g);
	t_rmrf(tmp);
	curl_global_cleanup();
	printf("PASS\n");
	return 0;
}
