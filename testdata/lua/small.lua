-- A small Lua workload for tally's trace oracle (a full edge trace of a run must stay small):
-- loops, string patterns, tables, closures, and errors raised several C frames deep.
local t = {}
for i = 1, 60 do t[#t + 1] = string.format("%d:%s", i, ("x"):rep(i % 5)) end
table.sort(t, function(a, b) return #a < #b or (#a == #b and a < b) end)
local n = 0
for _, s in ipairs(t) do
  for d in s:gmatch("%d") do n = n + tonumber(d) end
end
local function thrower(k)
  if k % 4 == 0 then error("boom " .. k) end
  return k * 2
end
local caught = 0
for k = 1, 24 do
  local ok, v = pcall(thrower, k)
  if ok then n = n + v else caught = caught + 1 end
end
local ok = pcall(table.sort, { 3, 1, 2 }, function(a, b) error("cmp") end)
local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
print(n, caught, ok, co(), co())
