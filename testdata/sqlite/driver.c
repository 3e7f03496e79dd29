/*
 * driver.c - deterministic SQLite workload for tally's real-code tests.
 *
 *     ./sqlite-driver [SIZE]        (SIZE >= 1, default 40)
 *
 * Uses the SQLite amalgamation API (sqlite3.h) on an in-memory database:
 * tables with constraints, prepared-statement inserts inside transactions,
 * indexes, joins, aggregates, GROUP BY/HAVING, ORDER BY, LIKE/GLOB, a
 * recursive CTE, window functions, triggers, a view, UPSERT, RETURNING,
 * UPDATE/DELETE, savepoints and rollbacks, application-defined SQL
 * functions/aggregates/collations, and many statements that fail
 * (UNIQUE/NOT NULL/CHECK/FOREIGN KEY violations, RAISE() in a trigger, a
 * CHECK failing half-way through a multi-row UPDATE, integer overflow,
 * errors from user functions, syntax errors, an exec callback aborting a
 * query, a progress handler interrupting one). Then it backs the database
 * up into a private temporary on-disk database (sqlite3_open("")) with a
 * tiny page cache, so the pager, journal and unix VFS are exercised too.
 *
 * SIZE scales the number of rows (and so the work) roughly linearly.
 * Every result row and every error message is folded into a checksum; one
 * line is printed per step and "checksum: XXXXXXXX" at the end.
 * Output is deterministic: no time, no addresses, no random() in queries.
 * SQLite's PRNG (temporary file names, journal nonces and the name of
 * VACUUM's temporary schema, which is parsed as SQL) gets a fixed seed, so
 * that every run, and every differently instrumented build, takes the same
 * control-flow path. Temporary files are unlinked as soon as they are
 * opened, and SQLite retries another name if one exists.
 *
 * Exits 0 on success, 1 if something unexpected happened.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sqlite3.h"

static uint32_t g_hash = 2166136261u;
static int g_unexpected = 0;

static void hash_bytes(uint32_t *h, const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; i++) {
    *h ^= s[i];
    *h *= 16777619u;
  }
}

static void hash_str(uint32_t *h, const char *s) {
  hash_bytes(h, s ? s : "\001NULL", s ? strlen(s) + 1 : 6);
}

static void hash_int(uint32_t *h, long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  hash_str(h, buf);
}

/* deterministic pseudo-random numbers */
static uint32_t g_seed = 2463534242u;
static uint32_t rnd(uint32_t n) {
  g_seed ^= g_seed << 13;
  g_seed ^= g_seed >> 17;
  g_seed ^= g_seed << 5;
  return g_seed % n;
}

static void report(const char *label, long long rows, uint32_t h) {
  printf("%-28s rows=%-7lld hash=%08x\n", label, rows, (unsigned)h);
  hash_str(&g_hash, label);
  hash_int(&g_hash, rows);
  hash_int(&g_hash, (long long)h);
}

/* Run one statement that is expected to succeed; fold every column of
 * every row into the checksum. Returns the number of rows. */
static long long query(sqlite3 *db, const char *label, const char *sql) {
  sqlite3_stmt *st = NULL;
  uint32_t h = 2166136261u;
  long long rows = 0;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) {
    printf("%s: prepare failed: %s\n", label, sqlite3_errmsg(db));
    g_unexpected = 1;
    return -1;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int i, n = sqlite3_column_count(st);
    rows++;
    for (i = 0; i < n; i++) {
      switch (sqlite3_column_type(st, i)) {
      case SQLITE_INTEGER:
        hash_int(&h, sqlite3_column_int64(st, i));
        break;
      case SQLITE_NULL:
        hash_str(&h, NULL);
        break;
      case SQLITE_BLOB:
        hash_bytes(&h, sqlite3_column_blob(st, i),
                   (size_t)sqlite3_column_bytes(st, i));
        break;
      default: /* TEXT and FLOAT: SQLite's own text rendering */
        hash_str(&h, (const char *)sqlite3_column_text(st, i));
        break;
      }
    }
  }
  if (rc != SQLITE_DONE) {
    printf("%s: step failed: %s\n", label, sqlite3_errmsg(db));
    g_unexpected = 1;
  }
  sqlite3_finalize(st);
  report(label, rows, h);
  return rows;
}

/* Run SQL with sqlite3_exec, which must succeed. */
static void exec_ok(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    printf("unexpected error: %s\n  in: %.60s\n", err ? err : "?", sql);
    g_unexpected = 1;
  }
  sqlite3_free(err);
}

/* Run SQL that is expected to fail with primary result code 'want'. */
static void exec_fail(sqlite3 *db, const char *label, const char *sql, int want) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  int ext = sqlite3_extended_errcode(db);
  printf("%-28s rc=%d ext=%d %s\n", label, rc, ext, err ? err : "(no message)");
  if ((rc & 0xff) != want) {
    printf("  ^ expected rc=%d\n", want);
    g_unexpected = 1;
  }
  hash_str(&g_hash, label);
  hash_int(&g_hash, rc);
  hash_str(&g_hash, err);
  sqlite3_free(err);
}

/* ------------------------------------------------------------------ */
/* application-defined functions, aggregate, collation, callbacks     */

/* weight(x): digit-sum based scalar; errors on negative input */
static void fn_weight(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  long long v, w = 0;
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  v = sqlite3_value_int64(argv[0]);
  if (v < 0) {
    sqlite3_result_error(ctx, "weight() of a negative number", -1);
    return;
  }
  while (v > 0) {
    w += (v % 10) * (v % 10);
    v /= 10;
  }
  sqlite3_result_int64(ctx, w);
}

/* strhash(text): FNV-1a of the text, as an integer */
static void fn_strhash(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  uint32_t h = 2166136261u;
  const unsigned char *s = sqlite3_value_text(argv[0]);
  (void)argc;
  if (s == NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  while (*s) {
    h ^= *s++;
    h *= 16777619u;
  }
  sqlite3_result_int64(ctx, (long long)h);
}

/* xoragg(int): aggregate XOR with rotation (order-dependent on purpose) */
struct xoragg { uint64_t acc; long long n; };
static void agg_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  struct xoragg *a = (struct xoragg *)sqlite3_aggregate_context(ctx, sizeof *a);
  (void)argc;
  if (a == NULL) return;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  a->acc = ((a->acc << 7) | (a->acc >> 57)) ^ (uint64_t)sqlite3_value_int64(argv[0]);
  a->n++;
}
static void agg_final(sqlite3_context *ctx) {
  struct xoragg *a = (struct xoragg *)sqlite3_aggregate_context(ctx, 0);
  if (a == NULL || a->n == 0) {
    sqlite3_result_null(ctx);
    return;
  }
  sqlite3_result_int64(ctx, (long long)(a->acc & 0x7fffffffffffLL));
}

/* REVNOCASE collation: case-insensitive comparison of the reversed strings */
static int coll_revnocase(void *arg, int n1, const void *p1, int n2, const void *p2) {
  const unsigned char *a = (const unsigned char *)p1, *b = (const unsigned char *)p2;
  int i = n1 - 1, j = n2 - 1;
  (void)arg;
  while (i >= 0 && j >= 0) {
    int ca = a[i], cb = b[j];
    if (ca >= 'A' && ca <= 'Z') ca += 32;
    if (cb >= 'A' && cb <= 'Z') cb += 32;
    if (ca != cb) return ca - cb;
    i--;
    j--;
  }
  return (i >= 0) - (j >= 0);
}

/* sqlite3_exec callback that aborts the query after 'limit' rows */
struct cb_state { int rows, limit; uint32_t h; };
static int exec_cb(void *arg, int n, char **vals, char **names) {
  struct cb_state *s = (struct cb_state *)arg;
  int i;
  (void)names;
  for (i = 0; i < n; i++) hash_str(&s->h, vals[i]);
  s->rows++;
  return s->rows >= s->limit; /* non-zero => SQLITE_ABORT */
}

/* progress handler: interrupt after a fixed number of callbacks */
static int progress_cb(void *arg) {
  int *budget = (int *)arg;
  return --*budget <= 0;
}

/* ------------------------------------------------------------------ */

static const char *const kCities[] = {"Oslo", "Lima", "Pune", "Kyiv", "Baku",
                                      "Riga", "Doha", "Nice", "Bern", "Cork"};
static const char *const kCats[] = {"tools", "toys", "books", "food", "garden",
                                    "music", "sport"};
static const char *const kSyll[] = {"ka", "lo", "mi", "ne", "ru", "ta", "vo",
                                    "zi", "be", "du", "fa", "go"};

static void make_name(char *buf, size_t n, int i) {
  int a = (int)rnd(12), b = (int)rnd(12), c = (int)rnd(12);
  snprintf(buf, n, "%s%s%s-%d", kSyll[a], kSyll[b], kSyll[c], i);
  if (i % 7 == 0) buf[0] = (char)(buf[0] - 32); /* some capitals */
}

static void create_schema(sqlite3 *db) {
  exec_ok(db,
    "PRAGMA foreign_keys = ON;"
    "CREATE TABLE customer("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  city TEXT NOT NULL,"
    "  balance INTEGER NOT NULL CHECK (balance > -100000)"
    ");"
    "CREATE TABLE product("
    "  id INTEGER PRIMARY KEY,"
    "  sku TEXT NOT NULL UNIQUE,"
    "  category TEXT NOT NULL,"
    "  price INTEGER NOT NULL CHECK (price >= 0),"
    "  weight REAL"
    ");"
    "CREATE TABLE orders("
    "  id INTEGER PRIMARY KEY,"
    "  customer_id INTEGER NOT NULL REFERENCES customer(id),"
    "  product_id INTEGER NOT NULL REFERENCES product(id),"
    "  qty INTEGER NOT NULL CHECK (qty > 0),"
    "  day INTEGER NOT NULL,"
    "  note TEXT"
    ");"
    "CREATE TABLE audit("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  action TEXT NOT NULL,"
    "  ref INTEGER"
    ");"
    "CREATE TABLE category_tree(name TEXT PRIMARY KEY, parent TEXT) WITHOUT ROWID;"
    "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT;"
    "CREATE INDEX orders_customer ON orders(customer_id, day);"
    "CREATE INDEX orders_product ON orders(product_id);"
    "CREATE INDEX product_cat_price ON product(category, price DESC);"
    "CREATE INDEX customer_city ON customer(city);"
    "CREATE INDEX customer_lower_name ON customer(lower(name));"
    "CREATE TRIGGER orders_ai AFTER INSERT ON orders BEGIN"
    "  UPDATE customer SET balance = balance -"
    "    new.qty * (SELECT price FROM product WHERE id = new.product_id)"
    "  WHERE id = new.customer_id;"
    "END;"
    "CREATE TRIGGER orders_ad AFTER DELETE ON orders BEGIN"
    "  INSERT INTO audit(action, ref) VALUES ('delete order', old.id);"
    "END;"
    "CREATE TRIGGER customer_bd BEFORE DELETE ON customer"
    "  WHEN old.balance < -50000 BEGIN"
    "  SELECT RAISE(ABORT, 'customer in debt');"
    "END;"
    "CREATE TRIGGER product_au AFTER UPDATE OF price ON product"
    "  WHEN new.price > old.price * 2 BEGIN"
    "  INSERT INTO audit(action, ref) VALUES ('price spike', new.id);"
    "END;"
    "CREATE VIEW customer_totals AS"
    "  SELECT c.id, c.name, c.city, count(o.id) AS norders,"
    "         coalesce(sum(o.qty * p.price), 0) AS spent"
    "  FROM customer c"
    "  LEFT JOIN orders o ON o.customer_id = c.id"
    "  LEFT JOIN product p ON p.id = o.product_id"
    "  GROUP BY c.id;");
}

static void populate(sqlite3 *db, int size) {
  sqlite3_stmt *ins_c = NULL, *ins_p = NULL, *ins_o = NULL;
  int ncust = 60 * size, nprod = 25 * size, nord = 400 * size;
  int i, rc, failures = 0;
  uint32_t h = 2166136261u;
  char name[64], sku[32], note[64];

  sqlite3_prepare_v2(db, "INSERT INTO customer(name, city, balance) VALUES (?1, ?2, ?3)",
                     -1, &ins_c, NULL);
  sqlite3_prepare_v2(db, "INSERT INTO product(sku, category, price, weight) VALUES (?, ?, ?, ?)",
                     -1, &ins_p, NULL);
  sqlite3_prepare_v3(db, "INSERT INTO orders(customer_id, product_id, qty, day, note) "
                         "VALUES (?, ?, ?, ?, ?)",
                     -1, SQLITE_PREPARE_PERSISTENT, &ins_o, NULL);

  exec_ok(db, "BEGIN");
  for (i = 1; i <= ncust; i++) {
    make_name(name, sizeof name, i);
    sqlite3_bind_text(ins_c, 1, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ins_c, 2, kCities[rnd(10)], -1, SQLITE_STATIC);
    sqlite3_bind_int(ins_c, 3, 100000 + (int)rnd(50000));
    rc = sqlite3_step(ins_c);
    if (rc != SQLITE_DONE) { failures++; hash_str(&h, sqlite3_errmsg(db)); }
    sqlite3_reset(ins_c);
  }
  /* duplicate names inside the same transaction: UNIQUE violations */
  for (i = 1; i <= 5; i++) {
    sqlite3_bind_text(ins_c, 1, "duplicate", -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_c, 2, "Oslo", -1, SQLITE_STATIC);
    sqlite3_bind_int(ins_c, 3, i);
    rc = sqlite3_step(ins_c);
    if (rc != SQLITE_DONE) { failures++; hash_str(&h, sqlite3_errmsg(db)); }
    rc = sqlite3_reset(ins_c);
    hash_int(&h, rc);
  }
  for (i = 1; i <= nprod; i++) {
    snprintf(sku, sizeof sku, "%s-%04d", kCats[i % 7], i);
    sqlite3_bind_text(ins_p, 1, sku, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ins_p, 2, kCats[i % 7], -1, SQLITE_STATIC);
    sqlite3_bind_int(ins_p, 3, 50 + (int)rnd(950));
    if (i % 5 == 0) sqlite3_bind_null(ins_p, 4);
    else sqlite3_bind_double(ins_p, 4, (double)rnd(1000) / 8.0);
    rc = sqlite3_step(ins_p);
    if (rc != SQLITE_DONE) { failures++; hash_str(&h, sqlite3_errmsg(db)); }
    sqlite3_reset(ins_p);
  }
  exec_ok(db, "COMMIT");

  /* orders in several transactions, with some failing rows */
  for (i = 1; i <= nord; i++) {
    int cust = 1 + (int)rnd((uint32_t)ncust), prod = 1 + (int)rnd((uint32_t)nprod);
    int qty = 1 + (int)rnd(9);
    if (i % 100 == 1) exec_ok(db, "BEGIN");
    if (i % 97 == 0) cust = ncust + 1000;      /* FOREIGN KEY violation */
    if (i % 89 == 0) qty = 0;                  /* CHECK violation */
    sqlite3_bind_int(ins_o, 1, cust);
    sqlite3_bind_int(ins_o, 2, prod);
    sqlite3_bind_int(ins_o, 3, qty);
    sqlite3_bind_int(ins_o, 4, (int)rnd(365));
    if (i % 3 == 0) {
      snprintf(note, sizeof note, "gift %s wrap", kCats[rnd(7)]);
      sqlite3_bind_text(ins_o, 5, note, -1, SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(ins_o, 5);
    }
    rc = sqlite3_step(ins_o);
    if (rc != SQLITE_DONE) {
      failures++;
      hash_int(&h, sqlite3_extended_errcode(db));
      hash_str(&h, sqlite3_errmsg(db));
    }
    sqlite3_reset(ins_o);
    if (i % 100 == 0 || i == nord) exec_ok(db, "COMMIT");
  }
  sqlite3_finalize(ins_c);
  sqlite3_finalize(ins_p);
  sqlite3_finalize(ins_o);

  exec_ok(db,
    "INSERT INTO category_tree VALUES"
    " ('all', NULL), ('leisure', 'all'), ('home', 'all'),"
    " ('toys', 'leisure'), ('music', 'leisure'), ('sport', 'leisure'),"
    " ('books', 'leisure'), ('tools', 'home'), ('garden', 'home'),"
    " ('food', 'home'), ('board games', 'toys'), ('lego', 'toys');");
  report("populate", failures, h);
}

static void queries(sqlite3 *db, int size) {
  char sql[512];
  query(db, "count", "SELECT (SELECT count(*) FROM customer), (SELECT count(*) FROM product),"
                     " (SELECT count(*) FROM orders), (SELECT sum(qty) FROM orders)");
  query(db, "join_group_order",
        "SELECT c.city, p.category, count(*), sum(o.qty * p.price), max(o.qty)"
        " FROM orders o JOIN customer c ON c.id = o.customer_id"
        " JOIN product p ON p.id = o.product_id"
        " GROUP BY c.city, p.category HAVING count(*) > 2"
        " ORDER BY 4 DESC, 1, 2");
  query(db, "view_top",
        "SELECT name, norders, spent FROM customer_totals"
        " ORDER BY spent DESC, name LIMIT 20");
  query(db, "aggregates",
        "SELECT category, count(*), min(price), max(price), avg(price), total(weight),"
        " group_concat(sku, '|' ORDER BY sku) FILTER (WHERE price > 500)"
        " FROM product GROUP BY category ORDER BY category");
  query(db, "like_glob",
        "SELECT name, upper(substr(name, 1, 3)), length(name), instr(name, 'a')"
        " FROM customer WHERE name LIKE '%ka%' OR name GLOB '[A-Z]*[0-9]'"
        " ORDER BY name COLLATE NOCASE");
  query(db, "notes_like", "SELECT note, count(*) FROM orders WHERE note LIKE 'gift t%'"
                          " GROUP BY note ORDER BY note");
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < %d)"
           " SELECT count(*), sum(x), sum(x * x %% 7), max(x) FROM seq", 500 * size);
  query(db, "cte_series", sql);
  query(db, "cte_collatz",
        "WITH RECURSIVE c(start, n, steps) AS ("
        "  SELECT value, value, 0 FROM (WITH RECURSIVE v(value) AS"
        "    (SELECT 1 UNION ALL SELECT value + 1 FROM v WHERE value < 60) SELECT value FROM v)"
        "  UNION ALL"
        "  SELECT start, CASE WHEN n % 2 = 0 THEN n / 2 ELSE 3 * n + 1 END, steps + 1"
        "  FROM c WHERE n > 1)"
        " SELECT start, max(steps) FROM c GROUP BY start ORDER BY 2 DESC, 1 LIMIT 10");
  query(db, "cte_tree",
        "WITH RECURSIVE walk(name, depth, path) AS ("
        "  SELECT name, 0, name FROM category_tree WHERE parent IS NULL"
        "  UNION ALL"
        "  SELECT t.name, w.depth + 1, w.path || '/' || t.name"
        "  FROM category_tree t JOIN walk w ON t.parent = w.name)"
        " SELECT w.path, w.depth, (SELECT count(*) FROM product p WHERE p.category = w.name)"
        " FROM walk w ORDER BY w.path");
  query(db, "window_running",
        "SELECT customer_id, id, qty,"
        " sum(qty) OVER (PARTITION BY customer_id ORDER BY day, id"
        "   ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),"
        " row_number() OVER (PARTITION BY customer_id ORDER BY day, id),"
        " lag(qty, 1, -1) OVER (PARTITION BY customer_id ORDER BY day, id),"
        " lead(day) OVER (PARTITION BY customer_id ORDER BY day, id)"
        " FROM orders ORDER BY customer_id, day, id");
  query(db, "window_rank",
        "SELECT name, spent, rank() OVER w, dense_rank() OVER w, ntile(4) OVER w,"
        " percent_rank() OVER w, first_value(name) OVER (PARTITION BY city ORDER BY spent DESC, name)"
        " FROM customer_totals WINDOW w AS (ORDER BY spent DESC)"
        " ORDER BY spent DESC, name");
  query(db, "window_groups",
        "SELECT day / 30 AS month, count(*) OVER (ORDER BY day / 30 RANGE BETWEEN 1 PRECEDING AND CURRENT ROW),"
        " sum(qty) OVER (ORDER BY day / 30 GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING EXCLUDE TIES)"
        " FROM orders WHERE id % 5 = 0 ORDER BY id");
  query(db, "subqueries",
        "SELECT c.name FROM customer c WHERE EXISTS"
        " (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.qty = 9)"
        " AND c.id NOT IN (SELECT customer_id FROM orders WHERE qty = 1)"
        " AND c.balance < (SELECT avg(balance) FROM customer)"
        " ORDER BY c.name");
  query(db, "compound",
        "SELECT city FROM customer WHERE balance > 100000"
        " UNION SELECT category FROM product"
        " EXCEPT SELECT 'Oslo' INTERSECT SELECT city FROM customer ORDER BY 1");
  query(db, "case_strings",
        "SELECT id, CASE WHEN price < 200 THEN 'cheap' WHEN price < 600 THEN 'mid' ELSE 'dear' END,"
        " printf('%08.3f|%-6s|%x', weight, category, price), replace(sku, '-', '_'), hex(sku),"
        " quote(weight), typeof(weight), round(coalesce(weight, -1) / 3.0, 2), trim('  ' || sku || '  ')"
        " FROM product ORDER BY id");
  query(db, "json",
        "SELECT json_object('id', id, 'sku', sku, 'tags', json_array(category, price)),"
        " json_extract(json_object('p', price), '$.p')"
        " FROM product WHERE id % 3 = 0 ORDER BY id");
  query(db, "udf_weight", "SELECT sum(weight(price)), sum(weight(qty * 1000 + day)), strhash(group_concat(orders.id))"
                          " FROM orders JOIN product ON product.id = orders.product_id");
  query(db, "udf_aggregate", "SELECT city, xoragg(balance ORDER BY id), count(*) FROM customer"
                             " GROUP BY city ORDER BY city");
  query(db, "collation", "SELECT name FROM customer WHERE id % 4 = 0"
                         " ORDER BY name COLLATE REVNOCASE, id LIMIT 50");
  query(db, "distinct_order", "SELECT DISTINCT city, id % 3 FROM customer ORDER BY 2 DESC, 1");
  query(db, "explain_query_plan", "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE customer_id = 3 AND day > 10");
}

static void mutations(sqlite3 *db) {
  /* UPDATE / DELETE / UPSERT / RETURNING / UPDATE FROM */
  exec_ok(db, "UPDATE product SET price = price + 10 WHERE category IN ('toys', 'books')");
  exec_ok(db, "UPDATE product SET price = price * 3 WHERE id % 11 = 0"); /* price spike trigger */
  exec_ok(db, "UPDATE customer SET balance = balance + t.s FROM"
              " (SELECT customer_id, sum(qty) AS s FROM orders GROUP BY customer_id) AS t"
              " WHERE t.customer_id = customer.id");
  exec_ok(db, "DELETE FROM orders WHERE qty = 1 AND day % 2 = 0");
  exec_ok(db, "INSERT INTO kv VALUES ('a', 1), ('b', 2), ('c', 3)");
  exec_ok(db, "INSERT INTO kv SELECT city, count(*) FROM customer GROUP BY city"
              " ON CONFLICT(k) DO UPDATE SET v = v + excluded.v");
  exec_ok(db, "INSERT INTO kv VALUES ('a', 10) ON CONFLICT(k) DO UPDATE SET v = kv.v * excluded.v");
  exec_ok(db, "INSERT OR IGNORE INTO customer(name, city, balance) VALUES ('duplicate', 'Lima', 5)");
  exec_ok(db, "INSERT OR REPLACE INTO kv VALUES ('b', 20)");
  query(db, "returning", "UPDATE kv SET v = v + 1 WHERE k < 'c' RETURNING k, v");
  query(db, "kv", "SELECT k, v FROM kv ORDER BY k");
  query(db, "audit", "SELECT action, count(*), sum(ref) FROM audit GROUP BY action ORDER BY action");
  query(db, "sqlite_sequence", "SELECT name, seq FROM sqlite_sequence");

  /* savepoints, ROLLBACK TO, full rollback */
  exec_ok(db, "SAVEPOINT s1;"
              " DELETE FROM orders WHERE id % 2 = 0;"
              " SAVEPOINT s2;"
              " UPDATE product SET price = 0;"
              " ROLLBACK TO s2;"
              " RELEASE s2;"
              " ROLLBACK TO s1;"
              " RELEASE s1;");
  exec_ok(db, "BEGIN; DELETE FROM orders; DELETE FROM audit; ROLLBACK;");
  query(db, "after_rollback", "SELECT count(*), sum(qty), (SELECT sum(price) FROM product) FROM orders");
}

static void failures(sqlite3 *db) {
  struct cb_state cs;
  int budget, rc;
  sqlite3_stmt *st = NULL;

  exec_fail(db, "unique", "INSERT INTO customer(name, city, balance) VALUES ('duplicate', 'Oslo', 1)",
            SQLITE_CONSTRAINT);
  exec_fail(db, "not_null", "INSERT INTO product(sku, category, price) VALUES ('x', NULL, 1)",
            SQLITE_CONSTRAINT);
  exec_fail(db, "check", "UPDATE orders SET qty = 0 WHERE id = (SELECT min(id) FROM orders)",
            SQLITE_CONSTRAINT);
  exec_fail(db, "foreign_key", "DELETE FROM customer WHERE id IN (SELECT customer_id FROM orders LIMIT 1)",
            SQLITE_CONSTRAINT);
  exec_fail(db, "trigger_raise",
            "UPDATE customer SET balance = -60000 WHERE id = 2; DELETE FROM customer WHERE id = 2",
            SQLITE_CONSTRAINT);
  /* CHECK fails part-way through a multi-row UPDATE: statement rollback */
  exec_fail(db, "check_midway", "UPDATE product SET price = price - 400", SQLITE_CONSTRAINT);
  query(db, "after_midway", "SELECT sum(price), min(price) FROM product");
  /* failure inside an explicit transaction: the transaction survives */
  exec_ok(db, "BEGIN");
  exec_ok(db, "INSERT INTO kv VALUES ('t1', 1)");
  exec_fail(db, "in_transaction", "INSERT INTO kv VALUES ('t1', 2)", SQLITE_CONSTRAINT);
  exec_ok(db, "COMMIT");
  exec_fail(db, "strict_type", "INSERT INTO kv VALUES ('s', 'not an int')", SQLITE_CONSTRAINT);
  exec_fail(db, "int_overflow", "SELECT abs(-9223372036854775807 - 1)", SQLITE_ERROR);
  exec_fail(db, "sum_overflow", "SELECT sum(x) FROM (SELECT 9223372036854775807 AS x UNION ALL SELECT 1)",
            SQLITE_ERROR);
  exec_fail(db, "udf_error", "SELECT weight(price - 600) FROM product ORDER BY id", SQLITE_ERROR);
  exec_fail(db, "syntax", "SELEC name FROM customer", SQLITE_ERROR);
  exec_fail(db, "no_table", "SELECT * FROM nowhere", SQLITE_ERROR);
  exec_fail(db, "no_column", "SELECT nocolumn FROM customer", SQLITE_ERROR);
  exec_fail(db, "bad_window", "SELECT ntile(0) OVER (ORDER BY id) FROM product", SQLITE_ERROR);
  exec_fail(db, "json_malformed", "SELECT json_extract('{\"a\":', '$.a')", SQLITE_ERROR);
  /* runtime error from a user function, mid-way through a recursive CTE */
  exec_fail(db, "cte_udf_error",
            "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 5000)"
            " SELECT sum(weight(2500 - x)) FROM r",
            SQLITE_ERROR);
  /* second statement of a batch fails: the first one stays applied */
  exec_fail(db, "batch_partial",
            "INSERT INTO kv VALUES ('batch', 1); INSERT INTO kv VALUES ('batch', 2)",
            SQLITE_CONSTRAINT);

  /* exec callback aborting a query */
  memset(&cs, 0, sizeof cs);
  cs.limit = 7;
  cs.h = 2166136261u;
  rc = sqlite3_exec(db, "SELECT id, name FROM customer ORDER BY id", exec_cb, &cs, NULL);
  printf("%-28s rc=%d rows=%d hash=%08x\n", "callback_abort", rc, cs.rows, (unsigned)cs.h);
  hash_int(&g_hash, rc);
  hash_int(&g_hash, cs.rows);
  hash_int(&g_hash, (long long)cs.h);
  if (rc != SQLITE_ABORT) g_unexpected = 1;

  /* progress handler interrupting a long cross join */
  budget = 50;
  sqlite3_progress_handler(db, 100, progress_cb, &budget);
  exec_fail(db, "interrupted",
            "SELECT count(*) FROM orders a, orders b WHERE a.qty + b.qty = 7", SQLITE_INTERRUPT);
  sqlite3_progress_handler(db, 0, NULL, NULL);

  /* step() error on a prepared statement, then reset and reuse it */
  sqlite3_prepare_v2(db, "INSERT INTO kv VALUES (?1, ?2)", -1, &st, NULL);
  for (rc = 0; rc < 4; rc++) {
    int r;
    sqlite3_bind_text(st, 1, rc % 2 ? "a" : "fresh", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, rc);
    r = sqlite3_step(st);
    hash_int(&g_hash, r);
    hash_int(&g_hash, sqlite3_reset(st));
    printf("%-28s step=%d %s\n", "prepared_reuse", r, r == SQLITE_DONE ? "ok" : sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  query(db, "kv_final", "SELECT k, v FROM kv ORDER BY k");
}

static int on_disk(sqlite3 *mem) {
  sqlite3 *disk = NULL;
  sqlite3_backup *bk;
  int rc, steps = 0;

  /* "" = private temporary on-disk database, deleted when closed */
  rc = sqlite3_open("", &disk);
  if (rc != SQLITE_OK) {
    printf("cannot open temporary database: %s\n", sqlite3_errmsg(disk));
    sqlite3_close(disk);
    return 1;
  }
  exec_ok(disk, "PRAGMA cache_size = 16; PRAGMA foreign_keys = ON");
  bk = sqlite3_backup_init(disk, "main", mem, "main");
  if (bk == NULL) {
    printf("backup_init failed: %s\n", sqlite3_errmsg(disk));
    sqlite3_close(disk);
    return 1;
  }
  do {
    rc = sqlite3_backup_step(bk, 8);
    steps++;
  } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
  printf("%-28s rc=%d ok=%d steps=%d\n", "backup", sqlite3_backup_finish(bk), rc == SQLITE_DONE, steps);
  hash_int(&g_hash, rc);

  exec_ok(disk, "PRAGMA cache_size = 16");
  query(disk, "disk_integrity", "PRAGMA integrity_check");
  query(disk, "disk_fk_check", "PRAGMA foreign_key_check");
  exec_ok(disk, "BEGIN; UPDATE orders SET note = coalesce(note, '') || printf('#%05d', id * 7);"
                " CREATE INDEX orders_note ON orders(note); COMMIT;");
  query(disk, "disk_note_index", "SELECT count(*), min(note), max(note) FROM orders WHERE note > '#5'");
  exec_fail(disk, "disk_rollback", "BEGIN; DELETE FROM product; COMMIT", SQLITE_CONSTRAINT);
  exec_ok(disk, "ROLLBACK");
  query(disk, "disk_totals", "SELECT city, sum(spent), sum(norders) FROM customer_totals"
                             " GROUP BY city ORDER BY city");
  exec_ok(disk, "DELETE FROM orders WHERE id % 3 = 0; VACUUM;");
  query(disk, "disk_after_vacuum", "SELECT count(*), sum(qty) FROM orders");
  query(disk, "disk_integrity2", "PRAGMA integrity_check");
  rc = sqlite3_close(disk);
  if (rc != SQLITE_OK) {
    printf("close failed: %d\n", rc);
    return 1;
  }
  return 0;
}

#ifdef TALLY_PROBE
uint64_t tally_events(void);
static uint64_t probe_sum = 1469598103934665603ull;
static unsigned long probe_count;
static int probe_progress(void *unused) {
  (void)unused;
  probe_sum = (probe_sum ^ tally_events()) * 1099511628211ull;
  probe_count++;
  return 0;
}
#endif

int main(int argc, char **argv) {
  sqlite3 *db = NULL;
  int size = 40, rc;

  if (argc > 1) {
    size = atoi(argv[1]);
    if (size < 1) {
      fprintf(stderr, "usage: %s [SIZE>=1]\n", argv[0]);
      return 2;
    }
  }
  /* See the header comment: a fixed PRNG seed keeps control flow deterministic. */
  sqlite3_test_control(SQLITE_TESTCTRL_PRNG_SEED, (int)0x5eed0000u, (sqlite3 *)NULL);

  rc = sqlite3_open(":memory:", &db);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "cannot open database: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  sqlite3_create_function(db, "weight", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                          fn_weight, NULL, NULL);
  sqlite3_create_function(db, "strhash", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                          fn_strhash, NULL, NULL);
  sqlite3_create_function(db, "xoragg", 1, SQLITE_UTF8, NULL, NULL, agg_step, agg_final);
  sqlite3_create_collation(db, "REVNOCASE", SQLITE_UTF8, NULL, coll_revnocase);

#ifdef TALLY_PROBE
  /* tally's events tests: SQLite calls the progress handler every 50 virtual-machine
   * instructions, from deep inside sqlite3VdbeExec; each call asks the exact event count. */
  sqlite3_progress_handler(db, 50, probe_progress, NULL);
#endif
  printf("sqlite %s size %d\n", sqlite3_libversion(), size);
  create_schema(db);
  populate(db, size);
  queries(db, size);
  mutations(db);
  failures(db);
  if (on_disk(db) != 0) g_unexpected = 1;
  query(db, "final", "SELECT count(*), sum(balance), xoragg(id) FROM customer");
  rc = sqlite3_close(db);
  if (rc != SQLITE_OK) {
    printf("close failed: %d\n", rc);
    g_unexpected = 1;
  }
  printf("size %d checksum: %08x%s\n", size, (unsigned)g_hash,
         g_unexpected ? " (UNEXPECTED RESULTS)" : "");
#ifdef TALLY_PROBE
  printf("probes %lu checksum %016llx\n", probe_count, (unsigned long long)probe_sum);
#endif
  return g_unexpected ? 1 : 0;
}
