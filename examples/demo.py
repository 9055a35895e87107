"""D-Gating at work: a linear layer finds its 3 informative inputs out of 20.

Run with ``make demo``. Every input feature's weights form one group, written as a vector
times D-1 scalar gates; plain L2 on all factors (``penalty``) trained with ordinary gradient
descent drives the unneeded groups to exact zero, no pruning step involved.
"""

import torch

from sksparse_nn import collapse, dgate, group_norms, penalty


def main(D=3, lam=0.05, steps=1500, lr=0.1):
    torch.manual_seed(0)
    n, p = 500, 20
    X = torch.randn(n, p)
    y = 2.0 * X[:, 0] - 1.5 * X[:, 1] + X[:, 2] + 0.1 * torch.randn(n)

    model = torch.nn.Linear(p, 1)
    dgate(model, groups="in", D=D)  # one group per input feature
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.5 * (model(X).squeeze(1) - y).pow(2).mean() + lam * penalty(model)
        loss.backward()
        opt.step()

    norms = group_norms(model)["weight"]
    collapse(model)  # plain nn.Linear again, effective weights baked in
    w = model.weight.detach().squeeze(0)
    live = torch.nonzero(w).squeeze(1).tolist()
    print(f"D={D}, lam={lam}: selected features {live}")
    print(f"  weights of the selected features: {[round(float(w[j]), 3) for j in live]}")
    dead = [j for j in range(p) if j not in live]
    print(f"  largest dropped group norm before thresholding: {float(norms[dead].max()):.2e}")
    print(f"  smallest live group norm:                        {float(norms[live].min()):.2e}")


if __name__ == "__main__":
    main()
