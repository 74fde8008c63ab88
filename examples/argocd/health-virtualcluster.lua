-- Argo CD health for vnest.dev/VirtualCluster, read from the status vnest's operator writes:
-- Degraded when the spec is refused or applying failed, Suspended while asleep or paused,
-- Healthy once Ready, Progressing until then (or until the operator saw the latest spec).
hs = { status = "Progressing", message = "waiting for the vnest operator" }

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

-- When condition `kind` has `status`: hs becomes `health` with the condition's message.
local function settles(kind, status, health)
  local c = condition(kind)
  if c ~= nil and c.status == status then
    hs.status = health
    hs.message = c.message
    return true
  end
  return false
end

if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.message = "the operator has not reconciled generation " .. generation .. " yet"
  return hs
end
if settles("SpecValid", "False", "Degraded") or settles("Sleeping", "True", "Suspended") then
  return hs
end
local control_plane = condition("ControlPlaneReady")
if obj.status.phase == "Failed" or (control_plane ~= nil and control_plane.reason == "ApplyFailed") then
  hs.status = "Degraded"
  hs.message = (control_plane ~= nil and control_plane.message) or "the virtual cluster failed"
  return hs
end
if settles("Ready", "True", "Healthy") then
  return hs
end
local ready = condition("Ready")
if ready ~= nil then
  hs.message = ready.message
end
return hs
