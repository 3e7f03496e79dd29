-- workload.lua - broad, deterministic Lua 5.4 workload for tally's
-- real-code tests (run with testdata/lua/driver.c):
--
--     ./lua-driver workload.lua [SIZE]
--
-- SIZE (default 100) scales the amount of work (roughly linearly); SIZE 1 is a quick
-- smoke run. Exercises string ops (gsub/format/patterns/pack), tables and
-- sorting, closures, coroutines, metatables, integer/float math, goto,
-- varargs, to-be-closed variables, finalizers and, above all, errors:
-- pcall/error, xpcall with traceback, errors raised several C frames deep
-- (table.sort comparators, string.gsub callbacks, metamethods, load()
-- syntax errors, stack overflow), coroutine errors. In C builds every
-- Lua error is a longjmp; in C++ builds it is a C++ throw.
--
-- Output is independent of the string-hash seed, of addresses and of
-- time: pairs() results are only combined commutatively, error messages
-- are stripped of their "chunk:line:" prefix, and the PRNG is seeded.
-- Prints one line per section and a final "checksum: XXXXXXXX" line.

local SIZE = tonumber(arg and arg[1]) or 100
assert(math.type(SIZE) == "integer" and SIZE >= 1, "SIZE must be a positive integer")

----------------------------------------------------------------------
-- checksum helpers
----------------------------------------------------------------------
local MASK = 0xFFFFFFFF

local function hstr(h, s)
  for i = 1, #s do
    h = ((h ~ s:byte(i)) * 16777619) & MASK
  end
  return h
end

local function mix(h, v)
  local t = type(v)
  if t == "number" then
    if math.type(v) == "integer" then
      return ((h ~ (v & MASK)) * 16777619 + (v >> 32)) & MASK
    end
    return hstr(h, string.format("%.12g", v))
  elseif t == "string" then
    return hstr(h, v)
  elseif t == "boolean" then
    return mix(h, v and 1 or 2)
  elseif t == "nil" then
    return mix(h, 3)
  end
  return hstr(h, t)
end

-- Keep the first line of a message (drops tracebacks) and strip the
-- "chunkname:line:" positions that Lua prepends (coroutine.wrap adds a
-- second one), so the output does not depend on the script's path.
local function clean(msg)
  if type(msg) ~= "string" then return type(msg) end
  msg = msg:match("^[^\n]*")
  local n
  repeat msg, n = msg:gsub("^.-:%d+: ", "", 1) until n == 0
  return msg
end

-- deterministic LCG, independent of math.random
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
  return seed % n + 1
end

----------------------------------------------------------------------
-- 1. strings
----------------------------------------------------------------------
local words = { "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
  "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi" }

local function section_strings(iter)
  local h = iter
  local parts = {}
  for i = 1, 40 do
    parts[#parts + 1] = words[rnd(#words)] .. tostring(rnd(1000))
  end
  local text = table.concat(parts, " ")
  -- gsub with pattern captures and replacement string/function/table
  local s1, n1 = text:gsub("(%a+)(%d+)", "%2-%1")
  h = mix(hstr(h, s1), n1)
  local s2 = text:gsub("%a+", function(w)
    if #w > 4 then return w:upper() end
    if w:find("^[aeiou]") then return nil end -- keep original
    return w:reverse()
  end)
  h = hstr(h, s2)
  local map = { alpha = "A", beta = "B", pi = 3.14 }
  h = hstr(h, (text:gsub("%a+", map)))
  -- find / match / gmatch
  local cnt = 0
  for w, num in text:gmatch("(%a+)(%d+)") do
    cnt = cnt + #w + tonumber(num)
  end
  h = mix(h, cnt)
  local a, b, cap = text:find("(e%a-a)")
  h = mix(mix(h, a or -1), b or -1)
  if cap then h = hstr(h, cap) end
  h = hstr(h, text:match("%d+%s+(%a+)") or "")
  h = mix(h, select(2, text:gsub("%f[%w]%w+", "")))
  h = hstr(h, ("[%s]"):rep(3, ","):format("x", "y", "z"))
  -- format
  h = hstr(h, string.format("%5d|%-5s|%05.1f|%x|%X|%o|%e|%g|%q|%c",
    iter, "ab", iter / 7, iter * 255, iter * 4095, iter, iter * 1e10,
    iter / 3, "quote\"\n\0end", 65 + iter % 26))
  h = hstr(h, string.format("%q", iter / 3))
  h = hstr(h, string.format("%10.3s|%-10s|%+d|%.0f", "abcdef", "l", iter, 2.5))
  -- byte/char/sub/len/lower/rep
  local bytes = { text:byte(1, 20) }
  h = hstr(h, string.char(table.unpack(bytes)):lower())
  h = hstr(h, text:sub(-15, -3) .. text:sub(5, 9))
  h = mix(h, #string.rep("ab", 50, "-"))
  -- utf8
  local u = utf8.char(72, 228, 8364, 128512, 955)
  h = mix(h, utf8.len(u))
  for p, c in utf8.codes(u) do h = mix(mix(h, p), c) end
  h = mix(h, utf8.codepoint(u, utf8.offset(u, 3)))
  -- string.pack / unpack
  local packed = string.pack("<i4>I2zs1dBj", -iter, iter * 3 % 65536,
    "zero-term", "counted", iter * 0.5, 200, iter * 1000003)
  h = hstr(h, packed)
  local v1, v2, v3, v4, v5, v6, v7, nextpos =
    string.unpack("<i4>I2zs1dBj", packed)
  h = mix(mix(mix(h, v1), v2), v5)
  h = hstr(hstr(h, v3), v4)
  h = mix(mix(mix(h, v6), v7), nextpos)
  h = mix(h, string.packsize("i4i8d"))
  return h
end

----------------------------------------------------------------------
-- 2. tables and sorting
----------------------------------------------------------------------
local function section_tables(iter)
  local h = iter
  local n = 300
  local t = {}
  for i = 1, n do t[i] = rnd(10000) end
  table.sort(t)
  for i = 1, n, 7 do h = mix(h, t[i]) end
  table.sort(t, function(a, b) return a % 97 < b % 97 or (a % 97 == b % 97 and a > b) end)
  for i = 1, n, 11 do h = mix(h, t[i]) end
  -- records sorted by two keys
  local recs = {}
  for i = 1, 120 do
    recs[i] = { name = words[rnd(#words)], score = rnd(50), id = i }
  end
  table.sort(recs, function(x, y)
    if x.name ~= y.name then return x.name < y.name end
    if x.score ~= y.score then return x.score > y.score end
    return x.id < y.id
  end)
  for i = 1, #recs, 5 do h = mix(hstr(h, recs[i].name), recs[i].id) end
  -- insert / remove / move / concat / unpack / pack
  local q = {}
  for i = 1, 50 do table.insert(q, i) end
  for i = 1, 10 do table.insert(q, 1, -i) end
  for i = 1, 15 do h = mix(h, table.remove(q, (i % 3) + 1)) end
  h = mix(h, table.remove(q))
  local m = table.move(q, 1, 10, 5, {})
  h = hstr(h, table.concat(m, ",", 5, 14))
  local pk = table.pack(table.unpack(q, 3, 9))
  h = mix(h, pk.n)
  -- hash part: keys combined commutatively, so order does not matter
  local d = {}
  for i = 1, 200 do
    local k = words[rnd(#words)] .. (i % 13)
    d[k] = (d[k] or 0) + i
  end
  d[1.5] = 7; d[true] = 8; d[-3] = 9
  local sum, keys = 0, 0
  for k, v in pairs(d) do
    keys = keys + 1
    sum = sum + v + (type(k) == "string" and #k or 1)
  end
  h = mix(mix(h, sum), keys)
  for k in pairs(d) do d[k] = nil end
  h = mix(h, next(d) == nil and 1 or 0)
  -- array with holes via ipairs
  local arr = { 1, 2, 3, nil, 5 }
  local c = 0
  for _, v in ipairs(arr) do c = c + v end
  h = mix(h, c)
  -- 2D grid / matrix multiply
  local A, B = {}, {}
  for i = 1, 12 do
    A[i], B[i] = {}, {}
    for j = 1, 12 do A[i][j] = (i * j) % 7 - 3; B[i][j] = (i + j) % 5 end
  end
  for i = 1, 12 do
    for j = 1, 12 do
      local s = 0
      for k = 1, 12 do s = s + A[i][k] * B[k][j] end
      h = mix(h, s)
    end
  end
  return h
end

----------------------------------------------------------------------
-- 3. closures, recursion, higher-order functions
----------------------------------------------------------------------
local function counter(start, step)
  local v = start
  return function() v = v + step; return v end,
         function() return v end,
         function(nv) v = nv end
end

local function map(f, t) local r = {} for i = 1, #t do r[i] = f(t[i]) end return r end
local function filter(p, t) local r = {} for i = 1, #t do if p(t[i]) then r[#r + 1] = t[i] end end return r end
local function reduce(f, acc, t) for i = 1, #t do acc = f(acc, t[i]) end return acc end

local function section_closures(iter)
  local h = iter
  local inc, get, set = counter(iter, 3)
  for _ = 1, 50 do inc() end
  h = mix(h, get())
  set(-1); inc()
  h = mix(h, get())
  -- memoized fibonacci via closure over a cache
  local cache = {}
  local function fib(n)
    if n < 2 then return n end
    local c = cache[n]
    if c then return c end
    c = fib(n - 1) + fib(n - 2)
    cache[n] = c
    return c
  end
  h = mix(h, fib(80))
  -- plain recursion
  local function fib2(n) if n < 2 then return n end return fib2(n - 1) + fib2(n - 2) end
  h = mix(h, fib2(16))
  local function ack(m, n)
    if m == 0 then return n + 1 end
    if n == 0 then return ack(m - 1, 1) end
    return ack(m - 1, ack(m, n - 1))
  end
  h = mix(h, ack(2, 30))
  local nums = {}
  for i = 1, 100 do nums[i] = i * iter end
  local sq = map(function(x) return x * x end, nums)
  local ev = filter(function(x) return x % 3 == 0 end, sq)
  h = mix(h, reduce(function(a, b) return a + b end, 0, ev))
  -- closures created in a loop capture fresh variables
  local fs = {}
  for i = 1, 10 do fs[i] = function() return i * 10 end end
  for i = 1, 10 do h = mix(h, fs[i]()) end
  -- tail calls
  local function loop(n, acc) if n == 0 then return acc end return loop(n - 1, acc + n) end
  h = mix(h, loop(5000, 0))
  return h
end

----------------------------------------------------------------------
-- 4. coroutines
----------------------------------------------------------------------
local function gen_range(a, b)
  return coroutine.wrap(function()
    for i = a, b do coroutine.yield(i) end
  end)
end

local function section_coroutines(iter)
  local h = iter
  for v in gen_range(1, 40) do h = mix(h, v * iter) end
  -- producer / filter / consumer pipeline
  local producer = coroutine.create(function()
    for i = 1, 60 do coroutine.yield(words[(i % #words) + 1]) end
    return "done"
  end)
  local function upper_filter(src)
    return coroutine.create(function()
      while true do
        local ok, w = coroutine.resume(src)
        if not ok or coroutine.status(src) == "dead" then return w end
        coroutine.yield(w:upper())
      end
    end)
  end
  local f = upper_filter(producer)
  while true do
    local ok, w = coroutine.resume(f)
    if coroutine.status(f) == "dead" then h = hstr(h, tostring(w)); break end
    h = hstr(h, w)
  end
  -- passing values in both directions
  local co = coroutine.create(function(a, b)
    local c = coroutine.yield(a + b)
    local d, e = coroutine.yield(c * 2)
    return d + e, coroutine.isyieldable(), coroutine.running() ~= nil
  end)
  local _, r1 = coroutine.resume(co, 1, iter)
  local _, r2 = coroutine.resume(co, r1 + 1)
  local _, r3, y, r = coroutine.resume(co, r2, 5)
  h = mix(mix(mix(mix(h, r1), r2), r3), y)
  h = mix(h, r)
  h = hstr(h, coroutine.status(co))
  h = mix(h, coroutine.isyieldable())
  -- yield across pcall (allowed in 5.4)
  local co2 = coroutine.wrap(function()
    local ok, err = pcall(function()
      coroutine.yield(1)
      coroutine.yield(2)
      error("inside")
    end)
    coroutine.yield(ok and 0 or 3)
    return clean(err)
  end)
  h = mix(mix(mix(h, co2()), co2()), co2())
  h = hstr(h, co2())
  -- coroutine.close on a suspended coroutine with a pending to-be-closed var
  local closed = 0
  local co3 = coroutine.create(function()
    local x <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
    coroutine.yield(1)
    return 2
  end)
  coroutine.resume(co3)
  h = mix(h, coroutine.close(co3))
  h = mix(h, closed)
  return h
end

----------------------------------------------------------------------
-- 5. metatables
----------------------------------------------------------------------
local Vec = {}
Vec.__index = Vec
local function vec(x, y) return setmetatable({ x = x, y = y }, Vec) end
Vec.__add = function(a, b) return vec(a.x + b.x, a.y + b.y) end
Vec.__sub = function(a, b) return vec(a.x - b.x, a.y - b.y) end
Vec.__mul = function(a, b)
  if type(a) == "number" then return vec(a * b.x, a * b.y) end
  if type(b) == "number" then return vec(a.x * b, a.y * b) end
  return a.x * b.x + a.y * b.y
end
Vec.__unm = function(a) return vec(-a.x, -a.y) end
Vec.__eq = function(a, b) return a.x == b.x and a.y == b.y end
Vec.__lt = function(a, b) return a:len2() < b:len2() end
Vec.__le = function(a, b) return a:len2() <= b:len2() end
Vec.__len = function(a) return 2 end
Vec.__tostring = function(a) return "(" .. a.x .. "," .. a.y .. ")" end
Vec.__concat = function(a, b) return tostring(a) .. tostring(b) end
Vec.__call = function(a, k) return a[k] end
Vec.__idiv = function(a, d) return vec(a.x // d, a.y // d) end
Vec.__mod = function(a, d) return vec(a.x % d, a.y % d) end
Vec.__band = function(a, b) return vec(a.x & b.x, a.y & b.y) end
Vec.__shl = function(a, n) return vec(a.x << n, a.y << n) end
function Vec:len2() return self.x * self.x + self.y * self.y end

local finalized = 0

local function section_metatables(iter)
  local h = iter
  local acc = vec(0, 0)
  local vs = {}
  for i = 1, 40 do
    local v = vec(rnd(21) - 11, rnd(21) - 11)
    vs[i] = v
    acc = acc + v * 2 - (-v)
  end
  h = hstr(h, tostring(acc))
  h = mix(h, acc * vec(1, 1))
  h = mix(h, #acc)
  table.sort(vs, function(a, b) return a < b end)
  for i = 1, #vs, 4 do h = hstr(h, vs[i] .. vs[i + 1]) end
  h = mix(h, vec(1, 2) == vec(1, 2))
  h = mix(h, vec(1, 2) <= vec(2, 1))
  h = mix(h, acc("x"))
  local q = (acc // 3) % 5
  h = mix(mix(h, q.x), q.y)
  local b = (vec(12, 10) & vec(6, 3)) << 2
  h = mix(mix(h, b.x), b.y)
  -- inheritance chain through __index tables and functions
  local Base = { kind = "base", greet = function(self) return "hi " .. self.name end }
  local Mid = setmetatable({ kind = "mid" }, { __index = Base })
  local obj = setmetatable({ name = "obj" .. iter }, { __index = Mid })
  h = hstr(hstr(h, obj.kind), obj:greet())
  local computed = setmetatable({}, { __index = function(t, k)
    local v = k * k
    rawset(t, k, v)
    return v
  end })
  for i = 1, 30 do h = mix(h, computed[i % 10]) end
  -- __newindex proxy recording writes
  local log = {}
  local proxy = setmetatable({}, { __newindex = function(t, k, v)
    log[#log + 1] = k .. "=" .. tostring(v)
    rawset(t, k, v)
  end })
  for i = 1, 10 do proxy["k" .. (i % 4)] = i end
  h = hstr(h, table.concat(log, ";"))
  -- __gc finalizers (counted when the objects are collected)
  for i = 1, 20 do
    setmetatable({}, { __gc = function() finalized = finalized + 1 end })
  end
  -- __close
  local closes = 0
  do
    local a <close> = setmetatable({}, { __close = function() closes = closes + 1 end })
    local b2 <close> = setmetatable({}, { __close = function() closes = closes + 10 end })
  end
  h = mix(h, closes)
  -- protected metatable
  local prot = setmetatable({}, { __metatable = "locked" })
  h = hstr(h, getmetatable(prot))
  h = hstr(h, clean(select(2, pcall(setmetatable, prot, {}))))
  return h
end

----------------------------------------------------------------------
-- 6. integer / float math
----------------------------------------------------------------------
local function section_math(iter)
  local h = iter
  local x = iter * 7919
  for i = 1, 200 do
    x = (x * 6364136223846793005 + 1442695040888963407) -- wraps around
    h = mix(h, x >> 40)
    h = mix(h, (x // 1000003) % 977)
    h = mix(h, x ~ (x >> 17) & 0xFF)
  end
  h = mix(h, math.maxinteger + 1 == math.mininteger)
  h = mix(h, math.mininteger // -1)
  h = mix(h, 7 // -2); h = mix(h, -7 % 3); h = mix(h, 7.5 // 2); h = mix(h, -7.5 % 2)
  h = mix(h, 2^53); h = mix(h, 10 / 4); h = mix(h, 3 | 12); h = mix(h, ~0)
  h = mix(h, 1 << 63); h = mix(h, 1 << 64); h = mix(h, -1 >> 1)
  local s = 0.0
  for i = 1, 300 do
    local f = i / (iter + 3)
    s = s + math.sin(f) * math.cos(f / 2) + math.sqrt(f) - math.log(f + 1) + math.exp(-f)
    s = s + math.fmod(i, 7.5) + math.abs(-f) + (f ^ 0.5)
  end
  h = mix(h, s)
  h = mix(h, math.floor(-3.5)); h = mix(h, math.ceil(-3.5))
  h = mix(h, math.tointeger(8.0)); h = mix(h, math.tointeger(8.5))
  h = mix(h, math.type(1)); h = mix(h, math.type(1.0)); h = mix(h, math.type("1"))
  h = mix(h, math.ult(1, -1)); h = mix(h, math.huge > 1e308); h = mix(h, -math.huge)
  h = mix(h, math.max(3, 9.5, -1)); h = mix(h, math.min(3, 9.5, -1))
  h = mix(h, math.fmod(-7, 3)); h = mix(h, math.modf(3.7)); h = mix(h, math.pi)
  -- string <-> number coercions
  h = mix(h, "10" + 5); h = mix(h, "3.5" * "2"); h = mix(h, 10 .. 20)
  h = mix(h, tonumber("0x1F")); h = mix(h, tonumber("z", 36)); h = mix(h, tonumber("  12  "))
  h = mix(h, tonumber("1e2")); h = mix(h, tonumber("abc")); h = mix(h, tonumber("7fffffffffffffff", 16))
  h = mix(h, 0.1 + 0.2 == 0.3); h = mix(h, 1 == 1.0); h = mix(h, "1" == 1)
  h = mix(h, 3 % math.huge); h = mix(h, -3 % math.huge)
  h = mix(h, tostring(1e300 * 1e10)); h = mix(h, tostring(-(0 / 0)) ~= "")
  -- seeded math.random is deterministic
  math.randomseed(42 + iter)
  for _ = 1, 20 do h = mix(h, math.random(1, 1000)) end
  h = mix(h, math.random(0) & 0xFFFF)
  return h
end

----------------------------------------------------------------------
-- 7. goto and varargs
----------------------------------------------------------------------
local function va_sum(...)
  local s = 0
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if v then s = s + v end
  end
  return s, select("#", ...)
end

local function va_forward(f, ...) return f(...) end
local function va_tail(...) return select(-1, ...) end
local function va_pack(...) local t = table.pack(...) return t.n, t[1], t[t.n] end

local function section_goto_varargs(iter)
  local h = iter
  -- continue via goto
  local odd = 0
  for i = 1, 100 do
    if i % 2 == 0 then goto continue end
    odd = odd + i
    ::continue::
  end
  h = mix(h, odd)
  -- break out of nested loops
  local fi, fj
  for i = 1, 50 do
    for j = 1, 50 do
      if i * j == 6 * iter + 12 then fi, fj = i, j; goto found end
    end
  end
  ::found::
  h = mix(mix(h, fi or 0), fj or 0)
  -- backward goto loop
  local k, acc = 0, 0
  ::top::
  k = k + 1
  acc = acc + k * k
  if k < 20 then goto top end
  h = mix(h, acc)
  -- varargs
  local s, n = va_sum(1, 2, nil, 4, iter)
  h = mix(mix(h, s), n)
  h = mix(h, select("#", va_forward(va_sum, 1, 2, 3)))
  h = mix(h, va_tail(1, 2, 3, "last") == "last")
  local pn, p1, pl = va_pack(nil, 2, nil)
  h = mix(mix(mix(h, pn), p1), pl)
  h = mix(h, select(2, "a", "b", "c") == "b")
  h = mix(h, (select(-2, 10, 20, 30)))
  local big = {}
  for i = 1, 200 do big[i] = i end
  h = mix(h, (va_sum(table.unpack(big))))
  return h
end

----------------------------------------------------------------------
-- 8. errors (longjmp / C++ throw in the C core)
----------------------------------------------------------------------
local ErrObj = { __tostring = function(e) return "ErrObj<" .. e.code .. ">" end }

local function deep_error(depth, kind)
  -- Lua frames with loops that are abandoned mid-iteration
  local s = 0
  for i = 1, 10 do
    s = s + i
    if depth == 0 and i == 5 then
      if kind == 1 then error("deep failure " .. s)
      elseif kind == 2 then error(setmetatable({ code = s }, ErrObj))
      elseif kind == 3 then error("level2", 2)
      elseif kind == 4 then local t = nil; return t.field -- VM-raised error
      else error() end
    end
    if depth > 0 and i == 3 then return deep_error(depth - 1, kind) + s end
  end
  return s
end

local function section_errors(iter)
  local h = iter
  -- pcall / error with various values and levels
  for kind = 1, 5 do
    local ok, err = pcall(deep_error, 4 + kind, kind)
    h = mix(h, ok)
    h = hstr(h, type(err) == "table" and tostring(err) or clean(err))
  end
  h = hstr(h, clean(select(2, pcall(error, "plain"))))
  h = hstr(h, clean(select(2, pcall(error, "nolevel", 0))))
  h = mix(h, select(2, pcall(error, 42)))
  h = mix(h, select("#", pcall(error)))
  -- runtime errors raised inside the VM and in C library functions
  local runtime = {
    function() return 1 + nil end,
    function() return {} .. "x" end,
    function() local f; f() end,
    function() return #5 end,
    function() return 1 // 0 end,
    function() return 1 % 0 end,
    function() return ("x"):rep(-1) .. nil end,
    function() return string.format("%d", 1.5) end,
    function() return string.char(256) end,
    function() return ("x"):bad() end,
    function() return math.floor("a") end,
    function() return table.concat({ 1, {}, 3 }) end,
    function() return setmetatable(1, {}) end,
    function() return tostring() end,
    function() return ipairs() end,
    function() return string.rep("x", 1 << 40) end,
    function() return utf8.codepoint("\xff") end,
    function() return string.unpack("i4", "ab") end,
    function() return 2 ^ "x" end,
    function() return {} < {} end,
    function() return math.tointeger({}) end,
    function() return select(0, 1) end,
  }
  for i = 1, #runtime do
    local ok, err = pcall(runtime[i])
    h = mix(h, ok)
    h = hstr(h, clean(err))
  end
  -- xpcall with message handler producing a traceback (count its lines)
  local function handler(e)
    local tb = debug.traceback(clean(e), 1)
    local lines = select(2, tb:gsub("\n", "\n"))
    return clean(e) .. "#" .. (lines > 3 and "deep" or "shallow")
  end
  for d = 0, 3 do
    local ok, msg = xpcall(deep_error, handler, d * 2, 1)
    h = mix(h, ok); h = hstr(h, msg)
  end
  h = hstr(h, select(2, xpcall(function(a, b) return a + b end, handler, 1, {})))
  h = mix(h, select(2, xpcall(function(a, b) return a + b end, handler, 1, 2)))
  -- error thrown from a table.sort comparator (C -> Lua -> error)
  local arr = {}
  for i = 1, 60 do arr[i] = rnd(100) end
  local calls = 0
  local ok, err = pcall(table.sort, arr, function(a, b)
    calls = calls + 1
    if calls == 37 + iter % 5 then error("cmp fail") end
    return a < b
  end)
  h = mix(h, ok); h = hstr(h, clean(err)); h = mix(h, calls)
  -- invalid order function: detected by the C sort code itself
  local bad = {}
  for i = 1, 40 do bad[i] = i % 5 end
  ok, err = pcall(table.sort, bad, function(a, b) return true end)
  h = mix(h, ok); h = hstr(h, clean(err))
  -- comparator that errors via a metamethod (__lt raising)
  local Cmp = { __lt = function(a, b)
    if a.v == 13 or b.v == 13 then error({ code = "unlucky" }) end
    return a.v < b.v
  end }
  local objs = {}
  for i = 1, 30 do objs[i] = setmetatable({ v = (i * 7) % 31 }, Cmp) end
  ok, err = pcall(table.sort, objs)
  h = mix(h, ok); h = hstr(h, type(err) == "table" and err.code or clean(err))
  -- error from a string.gsub callback, several frames inside C
  local seen = 0
  ok, err = pcall(string.gsub, "a1 b2 c3 d4 e5 f6", "(%a)(%d)", function(l, d)
    seen = seen + 1
    if d == "4" then error("gsub callback " .. l) end
    return d .. l
  end)
  h = mix(h, ok); h = hstr(h, clean(err)); h = mix(h, seen)
  -- nested pcall inside a gsub callback inside pcall
  ok, err = pcall(function()
    local out = ("xyz"):gsub(".", function(c)
      local ok2, e2 = pcall(error, c .. "!")
      return clean(e2)
    end)
    error(out)
  end)
  h = hstr(h, clean(err))
  -- errors in __index / __newindex / __add / __call / __tostring / __eq
  local Bad = {
    __index = function(t, k) if k == "boom" then error("index " .. k) end return k end,
    __newindex = function(t, k) error("readonly " .. k) end,
    __add = function() error("no add") end,
    __call = function(self, x) if x > 2 then error("call " .. x) end return x end,
    __tostring = function() error("no tostring") end,
    __eq = function() error("no eq") end,
    __len = function() return "notanumber" end,
  }
  local bo = setmetatable({}, Bad)
  local tests = {
    function() return bo.fine .. bo.boom end,
    function() bo.x = 1 end,
    function() return bo + 1 end,
    function() local s = 0 for i = 1, 5 do s = s + bo(i) end return s end,
    function() return tostring(bo) end,
    function() return bo == setmetatable({}, Bad) end,
    function() return table.concat({ 1, 2 }, bo) end,
    function() return ("%s"):format(bo) end,
    function() for i = 1, #bo do end end,
  }
  for i = 1, #tests do
    ok, err = pcall(tests[i])
    h = mix(h, ok); h = hstr(h, clean(err))
  end
  -- coroutine errors: resume returns false; wrap re-raises in the caller
  local co = coroutine.create(function(n)
    for i = 1, n do
      coroutine.yield(i)
      if i == 3 then error("co error at " .. i) end
    end
  end)
  local results = {}
  for _ = 1, 5 do
    local okc, v = coroutine.resume(co, 10)
    results[#results + 1] = tostring(okc) .. ":" .. clean(tostring(v))
  end
  h = hstr(h, table.concat(results, "|"))
  h = hstr(h, coroutine.status(co))
  local wrapped = coroutine.wrap(function()
    coroutine.yield("first")
    local t = {}
    return t.a.b -- VM error inside the coroutine
  end)
  h = hstr(h, wrapped())
  ok, err = pcall(wrapped)
  h = mix(h, ok); h = hstr(h, clean(err))
  ok, err = pcall(wrapped) -- dead coroutine
  h = mix(h, ok); h = hstr(h, clean(err))
  -- error inside a coroutine inside table.sort comparator inside pcall
  ok, err = pcall(function()
    local g = coroutine.wrap(function()
      table.sort({ 3, 1, 2 }, function(a, b) error("sort in coroutine") end)
    end)
    return g()
  end)
  h = mix(h, ok); h = hstr(h, clean(err))
  -- to-be-closed variables run while an error propagates; error in __close
  local order = {}
  ok, err = pcall(function()
    local a <close> = setmetatable({}, { __close = function(_, e)
      order[#order + 1] = "a:" .. clean(tostring(e))
    end })
    local b <close> = setmetatable({}, { __close = function(_, e)
      order[#order + 1] = "b:" .. clean(tostring(e))
      error("close b failed")
    end })
    error("body failed")
  end)
  h = mix(h, ok); h = hstr(h, clean(err)); h = hstr(h, table.concat(order, ","))
  -- syntax errors thrown from deep inside the recursive-descent parser
  local chunks = {
    "x = = 1",
    "return (((((((((1 + )))))))))",
    "local t = { a = 1, b = { c = { d = 'unfinished }}}",
    "for i = 1 do end",
    "goto nowhere",
    "local x <const> = 1; x = 2",
    "return 1 .. .. 2",
    "if x then else elseif y then end",
    "return " .. string.rep("(", 300) .. "1" .. string.rep(")", 300),
    "return 0x",
    "::a:: ::a::",
    "return function(a, b, ...) return ... end",
  }
  for i = 1, #chunks do
    local f, msg = load(chunks[i], "=chunk" .. i)
    h = mix(h, f ~= nil); h = hstr(h, msg and clean(msg) or "compiled")
  end
  -- load() with a reader function that fails midway
  local pieces, pi = { "return ", "1 + ", "2" }, 0
  local f = load(function() pi = pi + 1; return pieces[pi] end)
  h = mix(h, f())
  pi = 0
  ok, err = pcall(load, function()
    pi = pi + 1
    if pi == 2 then error("reader failed") end
    return pieces[pi]
  end)
  h = mix(h, ok); h = hstr(h, clean(tostring(err)))
  -- error with traceback through C functions (pcall inside sort inside xpcall)
  ok, err = xpcall(function()
    local t = { 5, 4, 3, 2, 1 }
    table.sort(t, function(a, b)
      local okk = pcall(error, "inner swallowed")
      if a == 1 then error("outer from sort") end
      return a < b
    end)
  end, function(e) return "H:" .. clean(e) end)
  h = mix(h, ok); h = hstr(h, err)
  return h
end

-- stack overflow: thousands of Lua frames unwound by one error (run once)
local function section_overflow()
  local h = 0
  local function rec(n) return 1 + rec(n + 1) end
  local ok, err = pcall(rec, 1)
  h = mix(h, ok)
  h = hstr(h, (clean(err):match("stack overflow") or "other"))
  -- C stack overflow through nested C calls (pcall -> pcall -> ...)
  local function crec(n) return select(2, pcall(crec, n + 1)) end
  local r = crec(1)
  h = hstr(h, type(r))
  -- error in error handling (message handler that itself errors)
  ok, err = xpcall(error, function(e) error("handler broke") end, "x")
  h = mix(h, ok); h = hstr(h, type(err))
  return h
end

----------------------------------------------------------------------
-- 9. a small compute kernel: a bytecode interpreter written in Lua
----------------------------------------------------------------------
local function run_vm(prog, input)
  local stack, sp, pc, steps = {}, 0, 1, 0
  local reg = { 0, 0, 0, 0 }
  while true do
    local op, a = prog[pc], prog[pc + 1]
    pc = pc + 2
    steps = steps + 1
    if op == "push" then sp = sp + 1; stack[sp] = a
    elseif op == "in" then sp = sp + 1; stack[sp] = input
    elseif op == "get" then sp = sp + 1; stack[sp] = reg[a]
    elseif op == "set" then reg[a] = stack[sp]; sp = sp - 1
    elseif op == "add" then stack[sp - 1] = stack[sp - 1] + stack[sp]; sp = sp - 1
    elseif op == "mul" then stack[sp - 1] = stack[sp - 1] * stack[sp] % 1000003; sp = sp - 1
    elseif op == "dup" then sp = sp + 1; stack[sp] = stack[sp - 1]
    elseif op == "swap" then stack[sp], stack[sp - 1] = stack[sp - 1], stack[sp]
    elseif op == "dec" then stack[sp] = stack[sp] - 1
    elseif op == "jnz" then
      local v = stack[sp]; sp = sp - 1
      if v ~= 0 then pc = a end
    elseif op == "halt" then return stack[sp], steps
    else error("bad op " .. tostring(op)) end
  end
end

local function section_kernel(iter)
  local h = iter
  -- sum of i*i (mod p) for i = input .. 1, as bytecode
  local prog = {
    "push", 0, "set", 1,          -- 1: acc = 0
    "in", 0, "set", 2,            -- 5: n = input
    "get", 2, "get", 2, "mul", 0, -- 9: n*n
    "get", 1, "add", 0, "set", 1, -- 15: acc = acc + n*n
    "get", 2, "dec", 0, "dup", 0, -- 21: n - 1 (twice)
    "set", 2, "jnz", 9,           -- 27: n = n - 1; loop while n ~= 0
    "get", 1, "halt", 0,          -- 31: return acc
  }
  for i = 1, 60 do
    local r, steps = run_vm(prog, i + iter)
    h = mix(mix(h, r), steps)
  end
  local ok, err = pcall(run_vm, { "push", 1, "bogus", 0 }, 0)
  h = mix(h, ok); h = hstr(h, clean(err))
  -- sieve of Eratosthenes
  local N = 3000
  local comp, count = {}, 0
  for i = 2, N do
    if not comp[i] then
      count = count + 1
      for j = i * i, N, i do comp[j] = true end
    end
  end
  h = mix(h, count)
  return h
end

----------------------------------------------------------------------
-- driver
----------------------------------------------------------------------
local sections = {
  { "strings", section_strings },
  { "tables", section_tables },
  { "closures", section_closures },
  { "coroutines", section_coroutines },
  { "metatables", section_metatables },
  { "math", section_math },
  { "goto_varargs", section_goto_varargs },
  { "errors", section_errors },
  { "kernel", section_kernel },
}

local total = 0
for _, sec in ipairs(sections) do
  local name, fn = sec[1], sec[2]
  local h = 0
  for iter = 1, SIZE do
    h = mix(h, fn(iter))
  end
  print(string.format("%-14s %08x", name, h))
  total = mix(total, h)
end

local oh = section_overflow()
print(string.format("%-14s %08x", "overflow", oh))
total = mix(total, oh)

collectgarbage("collect")
collectgarbage("collect")
print(string.format("%-14s %d", "finalized", finalized))
total = mix(total, finalized)

print(string.format("size %d checksum: %08x", SIZE, total))
