import sys,re,collections
d=collections.defaultdict(list); order=[]
for line in open(sys.argv[1]):
    m=re.match(r"r(\d+) (\S+) (\S+)\s+(\d+) B x(\d+)\s+\S+\s+(\d+) proc\(s\):\s+(\d+) op/s",line)
    if not m: continue
    r,v,op,sz,b,p,ops=m.groups()
    k=(op,int(sz),int(b),int(p))
    if k not in order: order.append(k)
    d[(k,v)].append(int(ops))
vs=sorted({v for (_,v) in d})
print("%-34s"%"workload"+"".join("%22s"%v for v in vs))
for k in sorted(order,key=lambda k:(k[3],k[2],k[1])):
    print("%-34s"%("%s %d x%d p%d"%k)+"".join("%22s"%"/".join("%.0fk"%(x/1000) for x in d[(k,v)]) for v in vs))
