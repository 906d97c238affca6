"""Pipeline parallelism: one stage per rank of an nn.Sequential MLP, trained with ScheduleGPipe and
Schedule1F1B over 4 microbatches, against the single-process model trained on the whole batch
(loss = mean over the batch, which the schedules' gradient scaling reproduces); at 2 ranks also
two stages per rank (4 stages in a loop) with ScheduleInterleaved1F1B and ScheduleLoopedBFS."""

from prelude import LIB, init, torch, write

if LIB == "torch":
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        ScheduleLoopedBFS,
    )
else:
    from ember.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        ScheduleLoopedBFS,
        SplitPoint,
        pipeline,
    )

nn = torch.nn
rank, world = init()
R = {}
CUTS = {2: [0, 4, 7], 4: [0, 2, 4, 6, 7]}[world]


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(),
                         nn.Linear(12, 4))


torch.manual_seed(5)
X, Y = torch.randn(8, 6), torch.randn(8, 4)


def reference(steps=3):
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return model, losses


def run(schedule_cls, stage_module, steps=3):
    stage = PipelineStage(stage_module, rank, world, torch.device("cpu"))
    schedule = schedule_cls(stage, n_microbatches=4, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.SGD(stage_module.parameters(), lr=0.1)
    means = []
    for _ in range(steps):
        opt.zero_grad()
        losses = []
        if rank == 0:
            schedule.step(X)
        elif rank == world - 1:
            out = schedule.step(target=Y, losses=losses)
            R["out_shape"] = list(out.shape)
            means.append(float(sum(losses) / len(losses)))
        else:
            schedule.step()
        opt.step()
    return means


ref, ref_losses = reference()
ref_piece = nn.Sequential(*list(ref.children())[CUTS[rank]:CUTS[rank + 1]])
for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
    piece = nn.Sequential(*list(make().children())[CUTS[rank]:CUTS[rank + 1]])
    means = run(cls, piece)
    R[f"{name}/params"] = all(bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6))
                              for a, b in zip(piece.parameters(), ref_piece.parameters()))
    if rank == world - 1:
        R[f"{name}/losses"] = all(abs(a - b) < 1e-5 for a, b in zip(means, ref_losses))
# eval(): forwards only, gradients untouched; the last stage gets the merged outputs and losses
piece = nn.Sequential(*list(make().children())[CUTS[rank]:CUTS[rank + 1]])
schedule = ScheduleGPipe(PipelineStage(piece, rank, world, torch.device("cpu")), n_microbatches=4,
                         loss_fn=nn.functional.mse_loss)
eval_losses = []
if rank == 0:
    got = schedule.eval(X)
elif rank == world - 1:
    got = schedule.eval(target=Y, losses=eval_losses)
else:
    got = schedule.eval()
with torch.no_grad():
    expected = make()(X)
R["eval"] = [got is None if rank != world - 1 else bool(torch.allclose(got, expected, atol=1e-6)),
             len(eval_losses), all(p.grad is None for p in piece.parameters())]
if world == 2:
    # Four stages, two per rank in a loop: rank r holds stages r and r + 2.
    cuts4 = [0, 2, 4, 6, 7]
    mine = [rank, rank + 2]
    ref_pieces = [nn.Sequential(*list(ref.children())[cuts4[s]:cuts4[s + 1]]) for s in mine]
    for name, cls in (("interleaved", ScheduleInterleaved1F1B), ("looped_bfs", ScheduleLoopedBFS)):
        pieces = [nn.Sequential(*list(make().children())[cuts4[s]:cuts4[s + 1]]) for s in mine]
        stages = [PipelineStage(piece, s, 4, torch.device("cpu")) for piece, s in zip(pieces, mine)]
        schedule = cls(stages, n_microbatches=4, loss_fn=nn.functional.mse_loss)
        opt = torch.optim.SGD([p for piece in pieces for p in piece.parameters()], lr=0.1)
        means = []
        for _ in range(3):
            opt.zero_grad()
            losses = []
            if rank == 0:
                schedule.step(X)
            else:
                out = schedule.step(target=Y, losses=losses)
                R[f"{name}/out_shape"] = list(out.shape)
                means.append(float(sum(losses) / len(losses)))
            opt.step()
        R[f"{name}/params"] = all(bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6)) for piece, ref_piece_s in
                                  zip(pieces, ref_pieces) for a, b in zip(piece.parameters(), ref_piece_s.parameters()))
        if rank == 1:
            R[f"{name}/losses"] = all(abs(a - b) < 1e-5 for a, b in zip(means, ref_losses))
if LIB == "ember":  # pipeline() cuts the Sequential by child names (PyTorch traces; its stages differ in names)
    split = {str(c): SplitPoint.BEGINNING for c in CUTS[1:-1]}
    pipe = pipeline(make(), split_spec=split)
    R["pipeline_stages"] = pipe.num_stages == world and [type(m).__name__ for m in pipe.get_stage_module(rank)] == [
        type(m).__name__ for m in ref_piece]
    run(ScheduleGPipe, pipe.get_stage_module(rank))
    R["pipeline_params"] = all(bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6))
                               for a, b in zip(pipe.get_stage_module(rank).parameters(), ref_piece.parameters()))
write(rank, R)
