-- wrk script: write `depth` requests at once (HTTP/1.1 pipelining).
--   wrk -t1 -c100 -d10s -s pipeline.lua http://host:port/path -- 10
init = function(args)
  local depth = tonumber(args[1]) or 10
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end
